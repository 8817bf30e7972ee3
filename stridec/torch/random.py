"""Random numbers in torch code that `stridec.trace` follows: Philox4x32-10 with an explicit
state, the same function in eager code and in a traced one (docs/philox.md#in-traced-code).

    def noisy_heads(x, state):
        noise, state = stridec.torch.philox_uniform(state, x.shape)
        return x.transpose(1, 2).contiguous(), noise.transpose(1, 2), state

`torch.rand` and the other draws from torch's generator are refused inside a traced
function (`refuse_random`): a graph is a function of its inputs, so a draw from hidden
global state could only be run once, at trace time, as a constant. The state here is a
(6,) uint32 (or int32) tensor the caller passes in and gets back advanced, as DirectML's
random generator operator takes it; the numbers are stridec's Philox stream, not torch's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, resolve_name

from stridec.errors import CallError, UnsupportedError
from stridec.ir.dtypes import as_dtype
from stridec.ir.graph import Graph

__all__ = ["philox", "philox_uniform", "refuse_random", "RANDOM_CALLS", "DROPOUTS"]


def philox(state: Any, sizes: Sequence[int]) -> tuple[Any, Any]:
    """`(bits, new_state)`: `sizes` uint32 words of Philox4x32-10 from `state` (six words:
    a 128-bit counter, a 64-bit key) and the state advanced by ceil(numel / 4) blocks
    (`Graph.philox`). On tensors it runs a compiled graph on the state's device; on a
    traced tensor it records the op."""
    from stridec.torch.trace import Proxy, _ints  # trace imports this module

    sizes = _ints((sizes,), "stridec.torch.philox")
    if isinstance(state, Proxy):
        bits, new_state = state.value.graph.philox(state.value, sizes)
        return state._wrap(bits), state._wrap(new_state)
    return _compiled("bits", sizes, None, 0.0, 1.0, state)(state)


def philox_uniform(state: Any, sizes: Sequence[int], dtype: Any = torch.float32,
                   low: float = 0.0, high: float = 1.0) -> tuple[Any, Any]:
    """`(values, new_state)`: uniform floats in `[low, high)` of `dtype` (float32, float16
    or bfloat16; `[0, 1)` never gives 1.0, as `torch.rand`) and the advanced state
    (`Graph.philox_uniform`, docs/philox.md). On tensors it runs a compiled graph on the
    state's device; on a traced tensor it records the op."""
    from stridec.torch.trace import Proxy, _ints  # trace imports this module

    sizes = _ints((sizes,), "stridec.torch.philox_uniform")
    dtype = as_dtype(dtype, "philox_uniform: dtype").name
    if isinstance(state, Proxy):
        values, new_state = state.value.graph.philox_uniform(state.value, sizes, dtype, low,
                                                             high)
        return state._wrap(values), state._wrap(new_state)
    return _compiled("uniform", sizes, dtype, low, high, state)(state)


def _compiled(kind: str, sizes: tuple[int, ...], dtype: str | None, low: float, high: float,
              state: Any) -> Any:
    if not isinstance(state, torch.Tensor):
        raise UnsupportedError(
            f"stridec.torch.philox: state: expected a torch.Tensor of 6 uint32 words or a "
            f"traced tensor; got {type(state).__name__}"
        )
    return _graph(kind, sizes, dtype, low, high, tuple(state.shape),
                  as_dtype(state.dtype, "state").name)


@functools.lru_cache(maxsize=64)
def _graph(kind: str, sizes: tuple[int, ...], dtype: str | None, low: float, high: float,
           state_sizes: tuple[int, ...], state_dtype: str) -> Any:
    from stridec.runtime.compile import compile

    g = Graph(f"philox_{kind}")
    s = g.input("state", state_sizes, state_dtype)
    if kind == "bits":
        g.output(*g.philox(s, sizes))
    else:
        g.output(*g.philox_uniform(s, sizes, dtype, low, high))
    return compile(g)


# Draws from torch's generator, by `resolve_name`: refused inside a traced function.
RANDOM_CALLS = frozenset(
    [f"torch.{n}" for n in (
        "rand rand_like randn randn_like randint randint_like randperm bernoulli normal "
        "multinomial poisson binomial rrelu rrelu_ dropout alpha_dropout feature_dropout "
        "feature_alpha_dropout native_dropout").split()]
    + [f"torch.Tensor.{n}" for n in (
        "uniform_ normal_ random_ bernoulli bernoulli_ exponential_ geometric_ log_normal_ "
        "cauchy_ multinomial").split()]
    + [f"torch.nn.functional.{n}" for n in (
        "rrelu rrelu_ gumbel_softmax fractional_max_pool2d fractional_max_pool3d").split()]
)
# Dropout is the identity where it does not train (`training=False`, as `nn.Dropout` in
# eval mode): traced as such; training, it draws (refused).
DROPOUTS = frozenset(f"torch.nn.functional.{n}" for n in (
    "dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout").split())


def random_refusal(name: str) -> UnsupportedError:
    return UnsupportedError(
        f"stridec.trace: {name} draws from torch's random generator, which a traced graph "
        "cannot follow (a graph is a function of its inputs: the draw would run once, at "
        "trace time, as a constant). Draw with Philox from a state the function takes: "
        "`values, state = stridec.torch.philox_uniform(state, sizes, dtype)` in the traced "
        "function (a (6,) uint32 state tensor among its arguments), or "
        "`Graph.philox_uniform(state, sizes, dtype)` in a built graph; stridec's stream, "
        "not torch's (docs/philox.md)"
    )


class refuse_random(TorchFunctionMode):  # noqa: N801 -- used as a context manager
    """Inside `stridec.trace`: every draw from torch's generator raises `random_refusal`
    at the call, also on tensors made inside the function (`torch.empty(n).uniform_()`),
    whose values would otherwise enter the graph as constants."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = resolve_name(func) or getattr(func, "__name__", "")
        if name in RANDOM_CALLS:
            raise random_refusal(name)
        if name in DROPOUTS and _training(name, args, kwargs):
            raise random_refusal(f"{name}(training=True)")
        return func(*args, **kwargs)


def _training(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether a dropout call draws: training and p > 0 (`F.dropout(input, p=0.5,
    training=True, inplace=False)`); torch returns the input itself otherwise."""
    default = not name.endswith("alpha_dropout")  # the alpha ones default to False
    training = kwargs.get("training", args[2] if len(args) > 2 else default)
    p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
    return bool(training) and p != 0


def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """A dropout that does not draw (`refuse_random` refused the others): the input itself,
    as torch returns it."""
    if not 0.0 <= p <= 1.0:
        raise CallError(f"dropout: p: expected a probability in [0, 1]; got {p!r}")
    return input
