"""einops code traces as written (no backend for the user to write) and matches torch:
values, dtypes, strides and storage sharing with the inputs.

The patterns are einops' own layout tests (github.com/arogozhnikov/einops, MIT license:
einops/tests/test_ops.py, test_einsum.py, test_packing.py, test_layers.py), each run on
torch tensors instead of numpy arrays: einops on torch is the oracle, einops on a traced
tensor compiled by stridec the subject.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import stridec
from stridec.errors import UnsupportedError

einops = pytest.importorskip("einops")
from einops import pack, rearrange, reduce, repeat, unpack  # noqa: E402
from einops.layers.torch import Rearrange  # noqa: E402


def _flat(out: Any) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _shares(t: torch.Tensor, inputs: Sequence[torch.Tensor]) -> bool:
    return any(t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() for x in inputs)


def check(fn: Callable, *inputs: torch.Tensor, backends: Sequence[str] = ("reference", "cpu")
          ) -> None:
    """`fn` traced and compiled gives what `fn` on torch gives, on each backend."""
    want = _flat(fn(*inputs))
    graph = stridec.trace(fn, *inputs)
    for backend in backends:
        got = _flat(stridec.compile(graph, backend=backend)(*inputs))
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            what = (backend, k)
            assert g.dtype == w.dtype and g.shape == w.shape, what
            assert torch.equal(g, w), what
            assert g.stride() == w.stride(), (what, g.stride(), w.stride())
            assert _shares(g, inputs) == _shares(w, inputs), (what, "storage sharing")


def x5(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.arange(2 * 3 * 4 * 5 * 6).reshape(2, 3, 4, 5, 6).to(dtype)


# test_ops.py: identity_patterns, equivalent_rearrange_patterns (on [2, 3, 4, 5, 6])
IDENTITY = [
    "...->...",
    "a b c d e-> a b c d e",
    "a b c d e ...-> ... a b c d e",
    "a b c d e ...-> a ... b c d e",
    "... a b c d e -> ... a b c d e",
    "a ... e-> a ... e",
    "a ... -> a ... ",
    "a ... c d e -> a (...) c d e",
]
EQUIVALENT = [
    ("a b c d e -> (a b) c d e", "a b ... -> (a b) ... "),
    ("a b c d e -> a b (c d) e", "... c d e -> ... (c d) e"),
    ("a b c d e -> a b c d e", "... -> ... "),
    ("a b c d e -> (a b c d e)", "... ->  (...)"),
    ("a b c d e -> b (c d e) a", "a b ... -> b (...) a"),
    ("a b c d e -> b (a c d) e", "a b ... e -> b (a ...) e"),
]
REARRANGE = IDENTITY + [p for pair in EQUIVALENT for p in pair]


@pytest.mark.parametrize("pattern", REARRANGE)
def test_rearrange_patterns(pattern: str) -> None:
    check(lambda x: rearrange(x, pattern), x5())
    # the same pattern on a non-contiguous input: views where torch views
    check(lambda x: rearrange(x.transpose(1, 3), pattern), x5(), backends=("cpu",))


# test_ops.py: test_rearrange_consistency_numpy (on [1, 2, 3, 5, 7, 11])
CONSISTENCY = [
    "a b c d e f -> a b c d e f",
    "b a c d e f -> a b d e f c",
    "a b c d e f -> f e d c b a",
    "a b c d e f -> (f e) d (c b a)",
    "a b c d e f -> (f e d c b a)",
    "a b c d e f -> a (b) (c d e) f",
    "a aa aa1 a1a1 aaaa a11 -> a aa aa1 a1a1 aaaa a11",
]


@pytest.mark.parametrize("pattern", CONSISTENCY)
def test_rearrange_consistency(pattern: str) -> None:
    check(lambda x: rearrange(x, pattern), torch.arange(2310).reshape(1, 2, 3, 5, 7, 11))


def test_rearrange_round_trip() -> None:
    def there_and_back(x: torch.Tensor) -> torch.Tensor:
        y = rearrange(x, "a b c d e f -> (f d) c (e b) a")
        return rearrange(y, "(f d) c (e b) a -> a b c d e f", b=2, d=5)

    check(there_and_back, torch.arange(2310).reshape(1, 2, 3, 5, 7, 11))


# test_ops.py: test_rearrange_permutations_numpy: every rank 1 to 9, a random permutation
@pytest.mark.parametrize("n_axes", range(1, 10))
def test_rearrange_permutations(n_axes: int) -> None:
    permutation = list(range(n_axes))
    random.Random(n_axes).shuffle(permutation)
    left = " ".join(f"i{axis}" for axis in range(n_axes))
    right = " ".join(f"i{axis}" for axis in permutation)
    check(lambda x: rearrange(x, f"{left} -> {right}").contiguous(),
          torch.arange(2**n_axes).reshape([2] * n_axes))


# test_ops.py: repeat_test_cases (on [2, 3, 5]) and test_cases_repeat_anonymous ([1, 2, 4, 6])
REPEATS = [
    ("a b c -> c a b", {}),
    ("a b c -> (c copy a b)", dict(copy=2, a=2, b=3, c=5)),
    ("a b c -> (a copy) b c ", dict(copy=1)),
    ("a b c -> (c a) (copy1 b copy2)", dict(a=2, copy1=1, copy2=2)),
    ("a ...  -> a ... copy", dict(copy=4)),
    ("... c -> ... (copy1 c copy2)", dict(copy1=1, copy2=2)),
    ("...  -> ... ", {}),
    (" ...  -> copy1 ... copy2 ", dict(copy1=2, copy2=3)),
    ("a b c  -> copy1 a copy2 b c () ", dict(copy1=2, copy2=1)),
]
ANONYMOUS = [
    ("a b c d -> c a d b", {}),
    ("a b c d -> (c 2 d a b)", dict(a=1, c=4, d=6)),
    ("1 b c d -> (d copy 1) 3 b c ", dict(copy=3)),
    ("1 ...  -> 3 ... ", {}),
    ("() ... d -> 1 (copy1 d copy2) ... ", dict(copy1=2, copy2=3)),
    ("1 b c d -> (1 1) (1 b) 2 c 3 d (1 1)", {}),
]


@pytest.mark.parametrize(("pattern", "sizes"), REPEATS)
def test_repeat_patterns(pattern: str, sizes: dict) -> None:
    check(lambda x: repeat(x, pattern, **sizes), torch.arange(30).reshape(2, 3, 5))


@pytest.mark.parametrize(("pattern", "sizes"), ANONYMOUS)
def test_repeat_anonymous_axes(pattern: str, sizes: dict) -> None:
    check(lambda x: repeat(x, pattern, **sizes), torch.arange(48.0).reshape(1, 2, 4, 6))


# test_ops.py: test_list_inputs, test_concatenations_and_stacking
def test_list_inputs() -> None:
    check(lambda x: rearrange(list(x), "... -> (...)"), x5())
    check(lambda x: repeat(list(x), "...  -> b (...)", b=3), x5())
    check(lambda x, y: rearrange([x, y], "b ... -> ... b"), x5()[0], x5()[1])


# test_ops.py: reductions that only move data: no reduced axis ("(a a2) ... -> (a2 a) ...")
# or axes of length 1 reduced by min / max (the element itself, in new memory).
@pytest.mark.parametrize("reduction", ["min", "max", "sum", "mean", "prod"])
def test_reduce_without_reduced_axes(reduction: str) -> None:
    check(lambda x: reduce(x, "(a a2) ... -> (a2 a) ...", reduction, a2=1), x5(torch.float64))


@pytest.mark.parametrize("reduction", ["min", "max"])
def test_reduce_of_length_one_axes(reduction: str) -> None:
    check(lambda x: reduce(x[:, :1, :, :1], "a b c d e -> e c a", reduction), x5())
    check(lambda x: reduce(x[:, :1], "a b ... -> ... a", reduction), x5(torch.int32))


@pytest.mark.parametrize("reduction", ["sum", "mean", "any"])
def test_reductions_that_compute_are_refused(reduction: str) -> None:
    with pytest.raises(UnsupportedError, match=f"einops.reduce.*'{reduction}'.*computes values"):
        stridec.trace(lambda x: reduce(x, "a b c d e -> (e c) a", reduction), x5())
    with pytest.raises(UnsupportedError, match="einops.reduce"):
        stridec.trace(lambda x: reduce(x[:, :1], "a b c d e -> a c d e", reduction), x5())


# test_einsum.py: the patterns of one operand; those that only move data trace as views
EINSUM_LAYOUT = ["i ... i -> i ...", "one one one -> one", "i j k -> j i k", "... -> ..."]
EINSUM_SUMS = ["i middle i -> middle", "i i -> ", "index ->", "i ... i -> ..."]


@pytest.mark.parametrize("pattern", EINSUM_LAYOUT)
def test_einsum_that_moves_data(pattern: str) -> None:
    x = torch.arange(27.0).reshape(3, 3, 3)
    check(lambda x: einops.einsum(x, pattern), x)


@pytest.mark.parametrize("pattern", EINSUM_SUMS)
def test_einsum_that_sums_is_refused(pattern: str) -> None:
    x = torch.arange(27.0).reshape(3, 3, 3)[(0,) * (3 - len(pattern.split("->")[0].split()))]
    with pytest.raises(UnsupportedError, match="einsum: .* sums over"):
        stridec.trace(lambda x: einops.einsum(x, pattern), x)


def test_einsum_of_two_operands_is_refused() -> None:
    with pytest.raises(UnsupportedError, match="einsum: .* multiplies 2 operands"):
        stridec.trace(lambda x, y: einops.einsum(x, y, "a b, b c -> a c"),
                      torch.ones(2, 3), torch.ones(3, 4))


# test_packing.py: test_numpy_trivial and unpack_and_pack
@pytest.mark.parametrize("pattern", ["h w *", "h * w", "* h w"])
def test_pack_and_unpack(pattern: str) -> None:
    r, g, b = (torch.randn(5, 7, generator=torch.Generator().manual_seed(k)) for k in range(3))
    check(lambda r, g, b: pack([r, g, b], pattern)[0], r, g, b)

    def round_trip(x: torch.Tensor) -> tuple:
        packed, shapes = pack([x, x[..., 0], x[..., :2]], "a b *")
        return (packed, *unpack(packed, shapes, "a b *"))

    check(round_trip, x5()[0])
    check(lambda x: tuple(unpack(x, [(2,), (2, 2)], "b c *")), torch.randn(2, 3, 6))


# test_layers.py: the Rearrange layer (torch's module, einops' scriptable path)
@pytest.mark.parametrize(("pattern", "sizes"), [
    ("b c h w -> b (c h w)", {}),
    ("b h w c -> b (w h c)", dict(c=5)),
    ("b c (h1 h2) (w1 w2) -> b (c h2 w2) h1 w1", dict(h2=2, w2=5)),
])
def test_rearrange_layer(pattern: str, sizes: dict) -> None:
    layer = Rearrange(pattern, **sizes)
    check(layer, torch.randn(2, 4, 6, 5))


def test_real_code() -> None:
    """ViT patchify and merge, Swin windows, MAE unpatchify, channel shuffle, heads split."""
    img = torch.randn(2, 3, 8, 12)
    check(lambda x: rearrange(x, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4), img,
          backends=("reference", "cpu", "interpret"))
    check(lambda x: rearrange(x, "b (h w) (p1 p2 c) -> b c (h p1) (w p2)", h=2, p1=4, p2=4),
          torch.randn(2, 6, 48))
    check(lambda x: rearrange(x, "b (h s1) (w s2) c -> (b h w) s1 s2 c", s1=4, s2=4),
          torch.randn(2, 8, 12, 3))
    check(lambda x: rearrange(x, "b (g c) h w -> b (c g) h w", g=3), torch.randn(2, 6, 4, 4))
    check(lambda x: rearrange(x, "b n (h d) -> b h n d", h=4), torch.randn(2, 5, 32))
    check(lambda x: repeat(x, "n d -> b n d", b=3), torch.randn(5, 8))

    def mae_patchify(imgs: torch.Tensor, p: int = 4) -> torch.Tensor:  # models_mae.py
        h = w = imgs.shape[2] // p
        x = imgs.reshape(imgs.shape[0], 3, h, p, w, p)
        x = torch.einsum("nchpwq->nhwpqc", x)
        return x.reshape(imgs.shape[0], h * w, p**2 * 3)

    check(mae_patchify, torch.randn(2, 3, 8, 8))


@pytest.mark.parametrize("pattern", ["b c h w -> b h w c", "b c h w -> b (h w) c",
                                     "b c h w -> (h w) b c"])
def test_symbolic_batch(pattern: str) -> None:
    """einops on a graph over a symbolic batch: one compiled function for every batch."""
    fn = stridec.compile(stridec.trace(lambda x: rearrange(x, pattern), torch.randn(3, 2, 4, 5),
                                       dynamic={0: [0]}), backend="cpu")
    for n in (2, 3, 6):  # sizes > 1: one specialization class (a size of 1 is its own)
        x = torch.randn(n, 2, 4, 5)
        got, want = fn(x), rearrange(x, pattern)
        assert torch.equal(got, want) and got.stride() == want.stride()
        assert _shares(got, [x]) == _shares(want, [x])
    assert fn.stats.compiles == 1


def test_einops_is_imported_only_when_traced() -> None:
    import subprocess
    import sys

    code = "import sys, stridec, stridec.torch; print('einops' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
