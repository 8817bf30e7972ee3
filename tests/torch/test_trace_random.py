"""Random numbers in traced code: torch's generator refused at the call, Philox with an
explicit state (`stridec.torch.philox_uniform`) traced, the same function eager and traced."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stridec
from stridec.runtime.backends.reference_philox import make_state, state_words

STATE = torch.from_numpy(make_state(2**32 - 3, (7, 9)).astype("uint32"))

DRAWS = {
    "torch.rand": lambda x: (x.t(), torch.rand(3)),
    "torch.rand_like": lambda x: torch.rand_like(x),
    "torch.randn": lambda x: (x, torch.randn(x.shape)),
    "torch.randn_like": lambda x: torch.randn_like(x),
    "torch.randint": lambda x: (x, torch.randint(0, 5, (3,))),
    "torch.randperm": lambda x: x[:, torch.randperm(3)],
    "torch.bernoulli": lambda x: torch.bernoulli(torch.full((2,), 0.5)),
    "torch.Tensor.uniform_": lambda x: (x, torch.empty(2, 3).uniform_()),
    "torch.Tensor.normal_": lambda x: (x, torch.empty(4).normal_()),
    "Tensor.uniform_": lambda x: x.uniform_(),
    "Tensor.bernoulli_": lambda x: x.bernoulli_(0.5),
    "torch.nn.functional.dropout(training=True)": lambda x: F.dropout(x, 0.5),
    "torch.nn.functional.dropout2d(training=True)":
        lambda x: F.dropout2d(x.unsqueeze(0), 0.1, training=True),
    "torch.nn.functional.alpha_dropout(training=True)": lambda x: F.alpha_dropout(x, 0.1, True),
}


@pytest.mark.parametrize("call", list(DRAWS))
def test_draws_from_torch_generator_are_refused_at_the_call(call: str) -> None:
    x = torch.randn(2, 3)
    before = torch.get_rng_state()
    with pytest.raises(stridec.UnsupportedError) as e:
        stridec.trace(DRAWS[call], x)
    message = str(e.value)
    assert f"{call} draws from torch's random generator" in message
    assert "stridec.torch.philox_uniform(state, sizes, dtype)" in message
    assert "Graph.philox_uniform" in message
    assert torch.equal(torch.get_rng_state(), before)  # refused before drawing


@pytest.mark.parametrize("make", [
    lambda x: F.dropout(x, 0.5, training=False),
    lambda x: F.dropout(x, 0.0),
    lambda x: torch.nn.Dropout(0.2).eval()(x),
    lambda x: F.alpha_dropout(x, 0.5),  # training=False by default
    lambda x: F.feature_alpha_dropout(x, 0.5),
], ids=["training=False", "p=0", "module-eval", "alpha", "feature-alpha"])
def test_dropout_that_does_not_draw_is_the_input_itself(make) -> None:
    x = torch.randn(2, 3)
    assert make(x) is x  # torch's answer
    g = stridec.trace(lambda x: make(x).t(), x)
    got = stridec.compile(g)(x)
    assert torch.equal(got, x.t()) and got.data_ptr() == x.data_ptr()


def test_dropout_probability_checked() -> None:
    with pytest.raises(stridec.CallError, match="dropout: p: expected a probability"):
        stridec.trace(lambda x: F.dropout(x, 1.5, training=False), torch.randn(2))


def noisy_heads(x: torch.Tensor, state: torch.Tensor):
    b, t, _ = x.shape
    noise, state = stridec.torch.philox_uniform(state, (b, 2, t), torch.bfloat16, -1.0, 1.0)
    bits, state = stridec.torch.philox(state, (t, 3))
    return x.view(b, t, 2, -1).transpose(1, 2).contiguous(), noise.transpose(1, 2), bits, state


def test_philox_in_traced_code_matches_the_same_code_eager() -> None:
    x = torch.randn(2, 5, 6)
    graph = stridec.trace(noisy_heads, x, STATE)
    for backend in ("cpu", "reference"):
        got = stridec.compile(graph, backend=backend)(x, STATE)
        want = noisy_heads(x, STATE)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride()
            assert torch.equal(g.view(torch.int32) if g.dtype == torch.uint32 else g,
                               w.view(torch.int32) if w.dtype == torch.uint32 else w)
    counter, key = state_words(got[3])
    assert key == (7, 9) and counter == 2**32 - 3 + (2 * 2 * 5 + 3) // 4 + (5 * 3 + 3) // 4


def test_philox_uniform_eager_is_the_graph_op() -> None:
    g = stridec.Graph("u")
    s = g.input("s", (6,), "uint32")
    g.output(*g.philox_uniform(s, (4, 33), "float16", 0.0, 1.0))
    want = stridec.run_reference(g, STATE)
    got = stridec.torch.philox_uniform(STATE, (4, 33), torch.float16)
    assert torch.equal(got[0], want[0])
    assert torch.equal(got[1].view(torch.int32), want[1].view(torch.int32))
    assert float(got[0].max()) < 1


def test_philox_over_symbolic_batch() -> None:
    def noise_like(x, state):
        return stridec.torch.philox_uniform(state, x.shape)

    graph = stridec.trace(noise_like, torch.randn(3, 4), STATE, dynamic={0: [0]})
    fn = stridec.compile(graph, backend="cpu")
    for n in (1, 2, 5, 17):
        got = fn(torch.randn(n, 4), STATE)
        want = stridec.torch.philox_uniform(STATE, (n, 4))
        assert torch.equal(got[0], want[0])
        assert torch.equal(got[1].view(torch.int32), want[1].view(torch.int32))


def test_philox_refuses_a_state_that_is_no_tensor() -> None:
    with pytest.raises(stridec.UnsupportedError, match="state: expected a torch.Tensor"):
        stridec.torch.philox_uniform([0, 0, 0, 0, 0, 0], (3,))
