"""`Tensor.view(dtype)`, the `bitcast` op, against torch: the layout rule and its errors
for every pair of dtypes on many memory arrangements; values bit for bit (NaN payloads
included), sizes, strides, storage offset and storage sharing of compiled graphs -- built
with the builder and traced -- on every CPU backend, for a bitcast alone and followed by
views, copies, permutes, packs and casts; refusals where torch refuses, at build and at a
call whose strides torch would refuse; the disk cache; autograd (none flows, as torch's)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import torch

import stridec
from stridec.errors import (
    CallError,
    LayoutError,
    StridecError,
    UnsupportedError,
    VerificationError,
)
from stridec.ir.dtypes import DTYPES
from stridec.ir.formats import get_format
from stridec.ir.layout import Layout
from stridec.runtime.backends.reference import pack_reference
from stridec.runtime.cache import MEMORY_CACHE

BACKENDS = ["reference", "cpu", "interpret"]
NAMES = list(DTYPES)


def _layout(t: torch.Tensor) -> Layout:
    return Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset())


def _arranged(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Tensors of `dtype` over a storage of 400 elements, in many arrangements."""
    s = torch.empty(400, dtype=dtype)
    return {
        "contiguous": s[:24].view(4, 6),
        "offset_1": s[1:25].view(4, 6),
        "offset_2": s[2:26].view(4, 6),
        "columns_2": s[:24].view(4, 6)[:, 2:],
        "columns_1_to_5": s[:24].view(4, 6)[:, 1:5],
        "pitched_rows": s[:48].view(4, 12)[:, :8],
        "odd_pitch": s[:60].view(4, 15)[:, :6],
        "transposed": s[:24].view(6, 4).t(),
        "stepped": s[:24].view(4, 6)[:, ::2],
        "one_column": s[:24].view(6, 4).t()[:, :1],
        "broadcast": s[:8].expand(3, 8),
        "three_dims": s[:48].view(2, 3, 8).permute(1, 0, 2),
        "empty": s[:24].view(4, 6)[:0],
        "empty_last": s[:24].view(4, 6)[:, :0],
        "scalar": s[3],
        "one_dim": s[4:12],
    }


def test_the_layout_rule_and_its_errors_are_torchs() -> None:
    """For every pair of dtypes and arrangement: the same sizes, strides and offset, or a
    `LayoutError` where torch raises, saying what torch says (its reason and the value)."""
    checked = refused = 0
    for a, b in itertools.product(NAMES, NAMES):
        ta, tb = DTYPES[a].torch, DTYPES[b].torch
        for name, t in _arranged(ta).items():
            try:
                want = t.view(tb)
            except RuntimeError as e:
                reason = str(e).split(" to view ")[0]
                got_value = str(e).rsplit("but got ", 1)[-1] if "but got" in str(e) else ""
                with pytest.raises(LayoutError) as raised:
                    _layout(t).view_dtype(a, b)
                message = str(raised.value)
                assert reason in message and f"to view {a} as {b}" in message, (a, b, name)
                assert message.endswith(got_value), (message, str(e))
                refused += 1
                continue
            assert _layout(t).view_dtype(a, b) == _layout(want), (a, b, name)
            checked += 1
    assert checked > 1000 and refused > 500  # both sides of the rule are exercised


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns of `t`: NaN payloads compare equal, -0.0 differs from 0.0."""
    if t.dtype.is_floating_point:
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t.view(torch.uint8) if t.dtype == torch.bool else t


def _shares(t: torch.Tensor, x: torch.Tensor) -> bool:
    return t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def _check(got: torch.Tensor, want: torch.Tensor, x: torch.Tensor, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.shape, want.shape)
    assert got.stride() == want.stride(), (what, got.stride(), want.stride())
    assert got.storage_offset() == want.storage_offset(), what
    assert torch.equal(_bits(got), _bits(want)), what
    assert _shares(got, x) == _shares(want, x), (what, "storage sharing")


def _inputs() -> dict[str, torch.Tensor]:
    """float32 (4, 6) inputs of random bits (NaNs with payloads, infinities, -0.0 among
    them) in four arrangements of their memory."""
    gen = torch.Generator().manual_seed(3)
    words = torch.randint(-2**31, 2**31, (200,), dtype=torch.int64, generator=gen)
    words[:6] = torch.tensor([0x7FC00001, -0x800000, 0x7F800000, -2**31, 0x7FBFFFFF, 1])
    base = words.to(torch.int32).view(torch.float32)
    return {
        "contiguous": base[:24].view(4, 6),
        "offset": base[6:30].view(4, 6),
        "pitched": base[:48].view(4, 12)[:, 2:8],
        "transposed": base[:24].view(6, 4).t(),
    }


# Run unchanged on a torch tensor, a builder `Value` and a traced tensor.
PROGRAMS: dict[str, Callable] = {
    "alone": lambda x: x.view(torch.int8),
    "same_size": lambda x: x.view(torch.int32),
    "keyword": lambda x: x.view(dtype=torch.int16),
    "then_a_view": lambda x: x.view(torch.int32).t(),
    "then_permute_contiguous": lambda x: x.view(torch.int16).permute(1, 0).contiguous(),
    "of_a_copy": lambda x: x.t().contiguous().view(torch.uint8),
    "up_with_offset": lambda x: x[:, 2:].view(torch.float64),
    "bits_then_cast": lambda x: x.view(torch.int8).float(),
    "cast_then_bits": lambda x: x.half().view(torch.int16),
    "down_then_stepped_copy": lambda x: x.view(torch.bfloat16)[:, ::3].contiguous(),
    "down_then_up": lambda x: x.view(torch.int8).view(torch.int64),
    "uint32_transposed": lambda x: x.view(torch.uint32).t().contiguous(),
    "clone": lambda x: x.view(torch.int32).clone(),
    "as_strided_of_bits": lambda x: x.view(torch.int8).as_strided((3, 4), (8, 2), 1),
    "to_itself": lambda x: x.view(torch.float32),
    "reshape_of_bits": lambda x: x.view(torch.int16).reshape(2, -1),
}


def _build(fn: Callable, x: torch.Tensor) -> stridec.Graph:
    g = stridec.Graph("built")
    v = g.input("x", tuple(x.shape), "float32")
    g.output(fn(v))
    return g


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_compiled_bitcasts_are_torchs(program: str, backend: str) -> None:
    fn = PROGRAMS[program]
    inputs = _inputs()
    example = inputs["contiguous"]
    for how, graph in (("built", _build(fn, example)), ("traced", stridec.trace(fn, example))):
        compiled = stridec.compile(graph, backend=backend)
        for arrangement, x in inputs.items():
            what = f"{program} {how} {arrangement}"
            try:
                want = fn(x)
            except RuntimeError:  # torch refuses these strides: so does the call
                with pytest.raises(StridecError, match="view\\(dtype\\)"):
                    compiled(x)
                continue
            _check(compiled(x), want, x, what)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bitcasts_with_packs_cats_and_two_outputs(backend: str) -> None:
    """A pack of bits (against the reference's plain-torch packing), a cat of two bitcast
    pieces (traced), and a view output beside a copy of the same bits."""
    x = _inputs()["contiguous"].reshape(1, 4, 2, 3)
    g = stridec.Graph("packed")
    v = g.input("x", (1, 4, 2, 3), "float32")
    bits = v.view(torch.int16)
    g.output(bits.pack("NCHW4"), bits, bits.permute(0, 3, 1, 2).contiguous())
    packed, alias, copied = stridec.compile(g, backend=backend)(x)
    _check(packed, pack_reference(get_format("NCHW4"), x.view(torch.int16)), x, "pack")
    _check(alias, x.view(torch.int16), x, "alias")
    _check(copied, x.view(torch.int16).permute(0, 3, 1, 2).contiguous(), x, "copy")

    def cat(x: torch.Tensor) -> torch.Tensor:
        w = x.view(torch.int32)
        return torch.cat([w[2:], w[:2].view(torch.float32).view(torch.int32)], 0)

    y = _inputs()["offset"]
    _check(stridec.compile(stridec.trace(cat, y), backend=backend)(y), cat(y), y, "cat")


def test_bitcast_refusals_are_torchs() -> None:
    g = stridec.Graph("bad")
    x = g.input("x", (4, 6), "float32")
    t = torch.zeros(4, 6)
    cases = [
        (lambda v: v.t().view(torch.int8), "self.stride(-1) must be 1 to view float32 as int8"),
        (lambda v: v[0, 0].view(torch.int16), "self.dim() cannot be 0 to view float32 as int16"),
        (lambda v: v[:, 1:].view(torch.float64),
         "self.size(-1) must be divisible by 2 to view float32 as float64"),
        (lambda v: v[:, 1:5].view(torch.float64),
         "self.storage_offset() must be divisible by 2 to view float32 as float64"),
        (lambda v: v.as_strided((4, 2), (3, 1)).view(torch.float64),
         "self.stride\\(0\\) must be divisible by 2"),
    ]
    for fn, message in cases:
        with pytest.raises(RuntimeError):
            fn(t)
        with pytest.raises(LayoutError, match=message.replace("(-1)", "\\(-1\\)").replace(
                "self.dim()", "self.dim\\(\\)").replace("storage_offset()",
                                                          "storage_offset\\(\\)")):
            fn(x)
        with pytest.raises(LayoutError, match="view\\(dtype\\)"):
            stridec.trace(fn, t)
    with pytest.raises(VerificationError, match="expected new sizes or a dtype, not both"):
        x.view(24, dtype=torch.int8)
    with pytest.raises(CallError, match="expected sizes or a dtype, not both"):
        stridec.trace(lambda v: v.view(24, dtype=torch.int8), t)
    assert x.view(torch.float32) is x and x.view("float32") is x  # as torch: itself


def test_a_write_through_a_bitcast_is_refused_and_its_rewrite_is_torchs() -> None:
    """torch writes through `view(dtype)`; stridec refuses it by name (`UnsupportedError`),
    and the rewrite its message gives -- the source viewed as the memory's dtype -- writes
    the bytes torch writes."""
    x, y = torch.randn(3, 4), torch.randint(-2**31, 2**31 - 1, (2, 4), dtype=torch.int32)

    def through(a, b):
        a.view(torch.int32)[1:].copy_(b)
        return a

    def rewritten(a, b):
        a[1:].copy_(b.view(torch.float32))
        return a

    with pytest.raises(UnsupportedError, match="copy_: expected a view of the memory in its "
                       "own dtype float32; got one read as int32"):
        stridec.trace(through, x, y)
    want, got = through(x.clone(), y), x.clone()
    fn = stridec.compile(stridec.trace(rewritten, x, y), backend="cpu")
    assert fn(got, y) is got and torch.equal(_bits(got), _bits(want))


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_bitcast_programs_come_back_from_the_disk_cache(backend: str, tmp_path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs that read a slot as another type, and copies that do, run the same from a
    plan read back from disk (the program's dtypes travel with it)."""
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    MEMORY_CACHE.clear_memory()
    fns = [PROGRAMS[p] for p in ("alone", "up_with_offset", "of_a_copy", "bits_then_cast",
                                 "down_then_up")]
    g = stridec.Graph("cached_bits")
    v = g.input("x", (4, 6), "float32")
    g.output(*(fn(v) for fn in fns))
    x = _inputs()["offset"]
    try:
        first = stridec.compile(g, backend=backend)
        for got, fn in zip(first(x), fns, strict=True):
            _check(got, fn(x), x, "first")
        MEMORY_CACHE.clear_memory()
        again = stridec.compile(g, backend=backend)
        for got, fn in zip(again(x), fns, strict=True):
            _check(got, fn(x), x, "from disk")
        assert (again.stats.compiles, again.stats.disk_hits) == (0, 1)
    finally:
        MEMORY_CACHE.clear_memory()


def test_symbolic_batch() -> None:
    """A bitcast over a symbolic batch: one compiled class for every batch size."""
    g = stridec.Graph("sym_bits")
    v = g.input("x", ("N", 6), "float32")
    g.output(v.view(torch.int8).t().contiguous(), v.view(torch.int16), v[:, 2:].view(torch.float64))
    fn = stridec.compile(g, backend="cpu")
    for n in (2, 3, 7, 7, 7, 7, 3):  # a size called again and again is a cached call
        x = torch.randint(-2**31, 2**31, (n, 6), dtype=torch.int64).to(torch.int32).view(
            torch.float32)
        got = fn(x)
        wants = (x.view(torch.int8).t().contiguous(), x.view(torch.int16),
                 x[:, 2:].view(torch.float64))
        for o, w in zip(got, wants, strict=True):
            _check(o, w, x, f"N={n}")
        outs = (torch.empty(24, n, dtype=torch.int8), torch.empty(n, 12, dtype=torch.int16),
                torch.empty(n, 2, dtype=torch.float64))
        assert fn(x, out=outs) is outs
        for o, w in zip(outs, wants, strict=True):
            assert torch.equal(_bits(o), _bits(w)), f"out=, N={n}"


def test_no_gradient_flows_through_bits() -> None:
    """torch's view(dtype) is not differentiable: a bitcast output of an input that
    requires grad is a view without grad, as torch's; gradients through the other
    outputs are torch's."""
    g = stridec.Graph("grad_bits")
    v = g.input("x", (4, 6), "float16")
    g.output(v.view(torch.bfloat16), v.t().contiguous(), v.view(torch.bfloat16).float())
    compiled = stridec.compile(g, backend="cpu")
    op = compiled.as_torch_op("stridec_test_bits::grad_bits")

    def torch_fn(x: torch.Tensor) -> tuple:
        return x.view(torch.bfloat16), x.t().contiguous(), x.view(torch.bfloat16).float()

    for fn in (compiled, op):
        x = torch.randn(4, 6, dtype=torch.float16, requires_grad=True)
        got, want = fn(x), torch_fn(x)
        assert [o.requires_grad for o in got] == [w.requires_grad for w in want] == [
            False, True, False]
        for o, w in zip(got, want, strict=True):
            assert torch.equal(_bits(o.detach()), _bits(w.detach()))
        assert _shares(got[0], x) == (fn is compiled)  # the operator copies a view
        got[1].float().sum().backward()
        assert torch.equal(x.grad, torch.ones_like(x))


def test_the_torch_op_copies_bitcast_outputs() -> None:
    """Under the custom-op contract a view of an input is copied, bits intact; opcheck
    passes."""
    g = stridec.Graph("op_bits")
    v = g.input("x", (4, 6), "float32")
    g.output(v.view(torch.int8), v[:, 2:].view(torch.float64).t().contiguous())
    op = stridec.compile(g, backend="cpu").as_torch_op("stridec_test_bits::op_bits")
    x = _inputs()["contiguous"]
    a, b = op(x)
    assert torch.equal(a, x.view(torch.int8)) and not _shares(a, x)
    assert torch.equal(_bits(b), _bits(x[:, 2:].view(torch.float64).t().contiguous()))
    torch.library.opcheck(op.overload, (x,))


def test_out_receives_the_bits() -> None:
    g = stridec.Graph("out_bits")
    v = g.input("x", (4, 6), "float32")
    g.output(v.view(torch.int16).t())
    x = _inputs()["contiguous"]
    out = torch.empty(12, 4, dtype=torch.int16)
    got = stridec.compile(g, backend="cpu")(x, out=out)
    assert got is out and torch.equal(out, x.view(torch.int16).t())
