"""The graph fuzzer: random layout programs, compiled, against the reference executor.

Each example builds a random graph mixing every view op (permute, transpose, expand,
slice, select, squeeze, unsqueeze, flip, reshape, view, flatten, unfold, split,
as_strided), copies to random layouts (permuted orders, pitched rows, offsets, fused
casts), packings and unpackings (NHWC, NCHW4/32/64, CHWN4, pitched rows), pads, casts,
cats and Philox (bits and uniform). Its inputs are sizes with 0, 1 and odd dims, handed
over as torch tensors with random strides and offsets over a bigger storage:

    transposed  Layout.for_order(sizes, perm), offset k
    channels_last  NHWC / NDHWC strides of rank 4 / 5, now and then of a stepped slice
    sliced      strides of a bigger tensor stepped by 1-2 in every dim, offset k
    padded      rows and elements with gaps (strides larger than packed)
    broadcast   some strides 0 (an expanded tensor)
    overlapping strides that revisit elements (a sliding window, as `unfold` makes)
    sliced_transposed  stepped, then the dims in a random order

each at an offset of 0 to 4 elements. Memory formats come in through `contiguous`,
`.to(memory_format=...)` and `clone` (row-major, channels-last): each is the value itself
exactly where torch's is. The Philox state is an input of its own, a row of a (k, 6)
input or a row of a flat input viewed as (2, 6), handed over contiguous, as a row of a
bigger tensor (at an offset) or as a strided column. What torch makes new memory of -- a
flip, a cast, a clone, a pad by nothing, a cat of one -- is often followed by what reads
its storage (`as_strided`, `view`, `reshape`, `contiguous`), which must address the new
tensor.

The graph runs compiled by the `cpu` backend (native kernels; one case in three by the
`interpret` backend too: the generated Triton kernels, run by Triton's interpreter on the
CPU) and by the `reference` backend, which runs the same ops
in torch, one by one, on the same tensors; every output must be equal bit for bit (two
NaNs count as equal; +0.0 and -0.0 do not), with the same sizes, dtype, strides and
storage offset, inside its storage, and share storage with exactly the inputs torch's
result shares it with (a view: its input; anything torch copies: none). Where the
reference refuses a call (a `view` the caller's strides cannot take), the compiled graph
must refuse it with the same error class.

Casts are drawn only where both sides define the result: a float is cast to an integer
type only when its values are known finite, small (|v| <= 8) and, for an unsigned type,
not negative (C leaves the others undefined, and torch and Triton differ there). In CI,
the explicit casts are of the pairs the suite builds the cpu backend's libraries of
(tests/cast_pairs.py: each pair is a C unit of 5-10 s of gcc); every pair with
`--fuzz-long`.

About a third of the graphs are also called with `out=`: each output written into a
window of a bigger buffer (dims in a drawn order, each padded, at an offset), now and then
into an argument of the same sizes and dtype (an out sharing memory with an input: the
call must stage it); each out must equal the reference output bit for bit, and every byte
of the buffers outside the windows keep its value.

A tenth as many graphs run under a random pipeline (some of the passes, in some order):
each must come back right, as above, or be refused with a StridecError (a pass it needs
is missing), never a raw error of torch or of a kernel.

Profiles (tests/reliability/conftest.py): 150 examples by default, 10,000 with
`--fuzz-long` (`--fuzz-examples N` sets the count). A failure found here becomes a named
test in test_regressions.py.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from hypothesis_draw import Draw, SeededDraw

import stridec
from stridec.errors import LayoutError, StridecError
from stridec.ir import builder as SB
from stridec.ir import ops as O
from stridec.ir.graph import Graph, Value
from stridec.ir.layout import Layout
from tests.cast_pairs import SUITE_CASTS

DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32",
          "int64", "uint32", "bool")
SIZE_CHOICES = (1, 2, 3, 1, 2, 3, 5, 7, 4, 3, 2, 9, 11)
MAX_NUMEL = 600  # the interpreter costs ~1 ms per program: keep tensors small
# Now and then an input big enough that its kernels take several programs (on the CPU a
# program covers >= 4096 elements, or a 2-D tile of 4096), so program ids, tile edges and
# the masks of partial tiles get exercised too.
BIG_SIZE_CHOICES = (17, 33, 65, 100, 129)
BIG_MAX_NUMEL = 20000
FORMATS_BY_RANK = {
    3: ("NCHW4", "NHWC", "NCHW32"),
    4: ("NCHW4", "NCHW32", "NCHW64", "CHWN4", "NHWC", "NCHW"),
    5: ("NCHW4", "NHWC"),
}
KINDS = (
    "permute", "transpose", "expand", "slice", "select", "squeeze", "unsqueeze", "flip",
    "reshape", "view", "flatten", "unfold", "split", "as_strided", "index", "movedim",
    "diagonal", "to_format", "pixel", "full_like", "stack", "roll", "bitcast",
    *("contiguous", "copy", "copy", "pack", "pack", "pitched", "unpack", "pad", "pad",
      "cast", "cast", "cat", "cat", "philox", "full", "clone", "fresh_then_view",
      "write") * 2,
)
# What torch makes new memory of and a view may then read through its storage:
# as_strided, view and reshape over it address the new tensor, not the input.
STORAGE_VIEWS = ("as_strided", "view", "reshape", "flatten", "contiguous")


# --------------------------------------------------------------------------- value ranges


@dataclass(frozen=True)
class Range:
    """What a value's elements may be: NaN or ±inf, negative, or of magnitude above 8."""

    nan: bool = False
    neg: bool = False
    large: bool = False

    def __or__(self, other: Range) -> Range:
        return Range(self.nan or other.nan, self.neg or other.neg, self.large or other.large)


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def cast_range(r: Range, src: str, dst: str) -> Range | None:
    """The range after casting `src` → `dst`, or None where C leaves the result undefined."""
    if dst == "bool":
        return Range()
    if is_float(src) and not is_float(dst):
        if r.nan or r.large or (r.neg and dst.startswith("uint")):
            return None
        return Range(neg=r.neg)
    if is_float(dst):
        overflow = dst == "float16" and r.large  # beyond 65504: inf
        return Range(nan=r.nan or overflow, neg=r.neg, large=r.large)
    # integer → integer: wraps modulo 2^bits, defined on both sides
    signed = not dst.startswith("uint")
    return Range(neg=signed and (r.neg or r.large), large=r.large or (r.neg and not signed))


def fills_for(dtype: str) -> tuple[float, ...]:
    """Fill values for pads and packings: exact ones, and ones the dtype converts (0.1
    rounded in float16, -2 wrapping in unsigned types, 1.5 truncated in integer types),
    NaN, and 70000, which float16 cannot hold (refused: that step is skipped)."""
    if dtype == "bool":
        return (0, 1)
    if is_float(dtype):
        return (0, 1, 3, 1.5, -2.5, 0.1, float("nan"), 70000.0)
    return (0, 1, 3, -2, 1.5)


def fill_range(fill: float, dtype: str) -> Range:
    """The range of a fill value once `dtype` holds it."""
    held = torch.full((), fill, dtype=stridec.as_dtype(dtype).torch).double().item()
    if math.isnan(held) or math.isinf(held):
        return Range(nan=True)
    return Range(neg=held < 0, large=abs(held) > 8)


# --------------------------------------------------------------------------- generator


@dataclass
class Builder:
    d: Draw
    graph: Graph
    values: list[Value] = field(default_factory=list)
    ranges: dict[int, Range] = field(default_factory=dict)
    state: Value | None = None  # what Philox reads: the state input or a view of it
    state_input: Value | None = None
    limit: int = MAX_NUMEL  # the largest value a growing op may make
    dtypes: tuple[str, ...] = DTYPES  # what inputs, casts and fills are drawn from
    casts: frozenset[tuple[str, str]] | None = None  # the pairs a cast may be; None: any

    def cast_targets(self, dtype: str) -> tuple[str, ...]:
        """The dtypes a value of `dtype` may be cast to (itself among them)."""
        return tuple(t for t in self.dtypes
                     if t == dtype or self.casts is None or (dtype, t) in self.casts)

    def fits(self, v: Value, factor: int = 1) -> bool:
        return v.numel() <= factor * self.limit

    def add(self, v: Value, r: Range) -> Value:
        self.values.append(v)
        self.ranges[id(v)] = r
        return v

    def range_of(self, v: Value) -> Range:
        return self.ranges[id(v)]


def _copy_layout(d: Draw, sizes: tuple[int, ...]) -> Layout:
    """A destination layout for `sizes`: a dim order, pitched rows, gaps, an offset."""
    rank = len(sizes)
    kind = d.choice(("order", "pitched", "gaps"))
    if kind == "pitched" and rank:
        base = Layout.padded(sizes, sizes[-1] + d.int(1, 3))
    elif kind == "gaps" and rank:
        order = d.permutation(rank)
        strides = [0] * rank
        acc = d.int(1, 2)
        for k in reversed(order):
            strides[k] = acc
            acc = acc * max(sizes[k], 1) + d.int(0, 2)
        base = Layout(sizes, tuple(strides))
    else:
        base = Layout.for_order(sizes, d.permutation(rank))
    return Layout(sizes, base.strides, d.int(0, 3) if d.chance(0.3) else 0)


def _step(b: Builder, v: Value) -> Value | None:
    """One random op on `v`; None when the drawn op does not apply here."""
    d, g = b.d, b.graph
    rank, sizes, r = v.ndim, v.shape, b.range_of(v)
    dtype = v.dtype.name
    kind = d.choice(KINDS)
    if not rank and kind not in ("reshape", "view", "contiguous", "copy", "cast", "unsqueeze",
                                 "expand", "philox", "as_strided", "full", "index", "clone",
                                 "fresh_then_view", "to_format", "full_like", "stack",
                                 "roll"):
        return None
    if kind == "permute":
        return b.add(v.permute(*d.permutation(rank)), r)
    if kind == "transpose":
        return b.add(v.transpose(d.int(-rank, rank - 1), d.int(-rank, rank - 1)), r)
    if kind == "expand" and rank < 6:
        new = [d.choice((1, 2, 3, 0)) if n == 1 else d.choice((n, -1)) for n in sizes]
        lead = [d.int(1, 3)] if d.chance(0.3) else []
        out = v.expand(*lead, *new)
        return b.add(out, r) if b.fits(out) else None
    if kind == "slice":
        dim = d.int(0, rank - 1)
        n = sizes[dim]
        stop = d.int(-n - 1, n + 1) if d.chance(0.7) else None
        return b.add(v.slice(dim, d.int(-n - 1, n + 1), stop, d.int(1, 3)), r)
    if kind == "select":
        dim = d.int(0, rank - 1)
        if not sizes[dim]:
            return None
        return b.add(v.select(dim, d.int(-sizes[dim], sizes[dim] - 1)), r)
    if kind == "squeeze":
        return b.add(v.squeeze(d.int(0, rank - 1) if d.chance(0.5) else None), r)
    if kind == "unsqueeze" and rank < 6:
        return b.add(v.unsqueeze(d.int(-rank - 1, rank)), r)
    if kind == "flip":
        return b.add(v.flip(*sorted({d.int(0, rank - 1) for _ in range(d.int(1, rank))})), r)
    if kind in ("reshape", "view"):
        new = d.factor(v.numel(), d.int(1, 4)) if v.numel() != 1 or d.chance(0.5) else ()
        if d.chance(0.3) and new:
            new = tuple(-1 if k == 0 else n for k, n in enumerate(new)) if v.numel() else new
        if kind == "view":
            return b.add(v.view(*new), r) if v.type.layout.view(new) is not None else None
        return b.add(v.reshape(*new), r)
    if kind == "flatten":
        start = d.int(0, rank - 1)
        return b.add(v.flatten(start, d.int(start, rank - 1)), r)
    if kind == "unfold":
        dim = d.int(0, rank - 1)
        out = v.unfold(dim, d.int(0, sizes[dim]), d.int(1, 3))
        return b.add(out, r) if b.fits(out) else None
    if kind == "diagonal":
        if rank < 2:
            return None
        dim1, dim2 = d.int(-rank, rank - 1), d.int(-rank, rank - 1)
        if dim1 % rank == dim2 % rank:
            return None
        return b.add(v.diagonal(d.int(-2, 2), dim1, dim2), r)
    if kind == "index":  # torch indexing sugar: ints, steps, None and `...`
        index: list[Any] = []
        for n in sizes[: d.int(0, rank)]:
            pick = d.choice(("all", "int", "step", "none"))
            if pick == "int" and n:
                index.append(d.int(-n, n - 1))
            elif pick == "step":
                index.append(slice(d.int(0, n), None, d.int(1, 3)))
            elif pick == "none" and rank < 6:
                index.append(None)
            else:
                index.append(slice(None))
        if d.chance(0.3):
            index.insert(d.int(0, len(index)), Ellipsis)
        return b.add(v[tuple(index)], r)
    if kind == "bitcast":  # the bytes as another dtype (no bool: bytes 2..255 are no bools)
        new_dtype = d.choice([t for t in DTYPES if t != "bool"])
        if dtype == "bool":  # a bool's bytes past 0 and 1 are unspecified (docs/errors.md)
            return None
        try:
            v.type.layout.view_dtype(dtype, new_dtype)
        except LayoutError:  # torch's rule refuses these strides
            return None
        if new_dtype == dtype:
            return v
        bits = Range(nan=is_float(new_dtype), neg=not new_dtype.startswith("uint"), large=True)
        return b.add(v.view(new_dtype), bits)
    if kind == "movedim" and rank >= 2:
        return b.add(v.movedim(d.int(0, rank - 1), d.int(-rank, rank - 1)), r)
    if kind == "full":
        dtype = d.choice(b.dtypes)
        fill = d.choice(fills_for(dtype))
        out = g.full(tuple(d.choice(SIZE_CHOICES) for _ in range(d.int(0, 3))), fill, dtype)
        return b.add(out, fill_range(fill, dtype))
    if kind == "split":
        dim = d.int(0, rank - 1)
        if d.chance(0.5) or not sizes[dim]:
            parts = v.split(d.int(1, max(1, sizes[dim])), dim)
        else:
            cut = d.int(0, sizes[dim])
            parts = v.split([cut, sizes[dim] - cut], dim)
        for p in parts:
            b.add(p, r)
        return d.choice(parts)
    if kind == "as_strided":
        return _as_strided(b, v)
    if kind == "contiguous":
        return b.add(v.contiguous(_memory_format(d, rank)), r)
    if kind == "to_format":  # the value itself where torch suggests the format, or a copy
        fmt = _memory_format(d, rank)
        return b.add(v.to(memory_format=fmt, copy=d.chance(0.2)), r)
    if kind == "pixel" and 3 <= rank <= 6:  # laid out as torch: channels-last stays so
        f = d.int(1, 2)
        if d.chance(0.5):
            out = SB.pixel_shuffle(v, f if sizes[-3] % (f * f) == 0 else 1)
        else:
            out = SB.pixel_unshuffle(v, f if sizes[-1] % f == sizes[-2] % f == 0 else 1)
        return b.add(out, r)
    if kind == "full_like":  # new memory laid out as torch's empty_like
        new_dtype = d.choice((None, None, *b.dtypes))
        fill = d.choice(fills_for(new_dtype or dtype))
        fmt = "preserve_format" if d.chance(0.6) else _memory_format(d, rank)
        return b.add(SB.full_like(v, fill, new_dtype, fmt), fill_range(fill, new_dtype or dtype))
    if kind == "stack" and rank < 6:
        out = SB.stack([v] * d.int(1, 2), d.int(-rank - 1, rank))
        return b.add(out, r) if b.fits(out) else None
    if kind == "roll":
        if not rank or d.chance(0.3):
            return b.add(v.roll(d.int(-3, 3)), r)
        dims = sorted({d.int(-rank, rank - 1) for _ in range(d.int(1, 2))}, key=lambda k: k % rank)
        dims = list({k % rank: k for k in dims}.values())
        return b.add(v.roll([d.int(-3, 3) for _ in dims], dims), r)
    if kind == "clone":
        return b.add(v.clone(_memory_format(d, rank) if d.chance(0.3) else "preserve_format"), r)
    if kind == "fresh_then_view":  # a flip, cast or clone, then a view of its storage
        how = d.choice(("flip", "cast", "clone", "pad0", "cat1"))
        if how == "flip" and rank:
            fresh = v.flip(*sorted({d.int(0, rank - 1) for _ in range(d.int(1, rank))}))
        elif how == "cast":
            new_dtype = d.choice(b.cast_targets(dtype))
            out_r = cast_range(r, dtype, new_dtype)
            if out_r is None:
                return None
            fresh, r = v.to(new_dtype), out_r
        elif how == "pad0" and rank:
            fresh = stridec.pad(v, (0, 0))
        elif how == "cat1" and rank:
            fresh = stridec.cat([v], d.int(0, rank - 1))
        else:
            fresh = v.clone()
        b.add(fresh, r)
        then = d.choice(STORAGE_VIEWS)
        if then == "as_strided":
            return _as_strided(b, fresh)
        if then == "contiguous":
            return b.add(fresh.contiguous(), r)
        if then == "flatten" and fresh.ndim:
            return b.add(fresh.flatten(), r)
        new = (-1,) if d.chance(0.5) or not fresh.numel() else d.factor(fresh.numel(), 2)
        if then == "view":
            ok = fresh.type.layout.view(_resolved(new, fresh.numel())) is not None
            return b.add(fresh.view(*new), r) if ok else None
        return b.add(fresh.reshape(*new), r)
    if kind == "copy":
        new_dtype = d.choice((None, None, *b.cast_targets(dtype)))
        out_r = r if new_dtype is None else cast_range(r, dtype, new_dtype)
        if out_r is None:
            return None
        return b.add(v.copy_to(_copy_layout(d, sizes), dtype=new_dtype), out_r)
    if kind == "cast":
        new_dtype = d.choice(b.cast_targets(dtype))
        out_r = cast_range(r, dtype, new_dtype)
        return None if out_r is None else b.add(v.to(new_dtype), out_r)
    if kind == "pack" and rank in FORMATS_BY_RANK:
        fmt = d.choice(FORMATS_BY_RANK[rank])
        fill = d.choice(fills_for(dtype))
        packed = v.pack(fmt, fill=fill)
        if not b.fits(packed, 4):
            return None
        b.add(packed, r | fill_range(fill, dtype))
        if d.chance(0.5):  # back again, with the same or fewer channels
            # The channel blocks: dim 1 of NCHWx, dim 0 of CHWN4; none for NHWC, NCHW.
            blocks = {"CHWN4": 0, "NCHW4": 1, "NCHW32": 1, "NCHW64": 1}.get(fmt)
            blocks = None if blocks is None else packed.shape[blocks]
            channels = sizes[1]
            if blocks is not None and channels and d.chance(0.5):
                block = packed.shape[-1]
                channels = d.int(block * (blocks - 1) + 1, block * blocks)
            return b.add(packed.unpack(fmt, channels), r | fill_range(fill, dtype))
        return packed
    if kind == "pitched":
        align = d.choice((4, 8, 16))
        fill = d.choice(fills_for(dtype))
        packed = v.pack(f"pitched<{align}>", fill=fill)
        b.add(packed, r | fill_range(fill, dtype))
        if d.chance(0.5):
            return b.add(packed.unpack(f"pitched<{align}>", sizes[-1]), r)
        return packed
    if kind == "unpack" and rank == 5 and sizes[4] == 4 and sizes[1] > 0:
        return b.add(v.unpack("NCHW4", d.int(4 * sizes[1] - 3, 4 * sizes[1])), r)
    if kind == "pad":
        pads: list[int] = []
        for k in range(d.int(1, min(rank, 3))):
            n = sizes[rank - 1 - k]
            if k == 0 and d.chance(0.4):  # a long run of fill after the row (it streams)
                pads += [d.int(0, 2), d.int(64, 96)]
                continue
            before = d.int(-n, 2)
            pads += [before, d.int(-(n + min(before, 0)), 2)]  # torch: crops fit the dim
        fill = d.choice(fills_for(dtype))
        out = stridec.pad(v, pads, value=fill)
        return b.add(out, r | fill_range(fill, dtype)) if b.fits(out, 4) else None
    if kind == "cat":
        dim = d.int(0, rank - 1)
        fits = [w for w in b.values if w.ndim == rank and w.dtype == v.dtype and all(
            x == y for k, (x, y) in enumerate(zip(w.shape, sizes, strict=True)) if k != dim)]
        parts = [d.choice(fits) for _ in range(d.int(1, 2))] + [v]
        parts = [parts[i] for i in d.permutation(len(parts))]
        out = stridec.cat(parts, dim)
        merged = Range()
        for p in parts:
            merged = merged | b.range_of(p)
        return b.add(out, merged) if b.fits(out, 4) else None
    if kind == "philox":
        return _philox(b)
    if kind == "write":
        return _write(b, v)
    return None


def _write(b: Builder, v: Value) -> Value | None:
    """An in-place write into `v`'s elements, where its memory is a buffer the graph made
    (never an argument's: the fuzzer's tensors must come back as they went in, nor Philox
    bits): a value of `v`'s sizes and dtype (maybe over the same memory: the disjoint or
    overlapping windows both sides must refuse alike), one element of it broadcast, or a
    fill. Every value over the old memory is taken again over the new, as trace does."""
    d = b.d
    old = v.root()
    if isinstance(O.storage_root(old).owner, (O.InputOp, O.PhiloxOp, O.PhiloxUniformOp)):
        return None
    if v.numel() and v.type.layout.may_overlap():
        return None  # an expanded view: torch refuses to write into it
    dtype = v.dtype.name
    same = [w for w in b.values if w.shape == v.shape and w.dtype == v.dtype and w is not v]
    one = [w for w in b.values if w.numel() == 1 and w.dtype == v.dtype]
    choice = d.int(0, 2)
    if choice == 0 and same:
        src = d.choice(same)
        written, r = v.copy_(src), b.range_of(src)
    elif choice == 1 and one:
        src = d.choice(one)
        written, r = v.copy_(src.reshape(*([1] * v.ndim))), b.range_of(src)
    else:
        fill = d.choice(fills_for(dtype))
        written, r = v.fill_(fill), fill_range(fill, dtype)
    new = written.root()
    for i, w in enumerate(b.values):
        if w.root() is old:
            b.values[i] = SB.replay_views(w, old, new)
            b.ranges[id(b.values[i])] = b.range_of(w) | r
    return b.add(written, b.range_of(v) | r)


def _memory_format(d: Draw, rank: int) -> str:
    """A memory format a value of `rank` can take: row-major, or channels-last for rank
    4 (channels_last_3d for rank 5) half the time."""
    channels_last = {4: "channels_last", 5: "channels_last_3d"}.get(rank)
    return channels_last if channels_last and d.chance(0.5) else "contiguous_format"


def _resolved(sizes: tuple[int, ...], numel: int) -> tuple[int, ...]:
    """`sizes` with a -1 filled in (numel > 0)."""
    known = math.prod(n for n in sizes if n != -1)
    return tuple(numel // known if n == -1 else n for n in sizes)


def _as_strided(b: Builder, v: Value) -> Value | None:
    """A random in-bounds `as_strided` over a materialized root without gaps.

    Not over an input (the caller's storage may be smaller than the declared sizes: a
    broadcast), and not over a buffer with gaps (pitched rows, an offset): the gaps are
    never written, so reading them reads whatever `torch.empty` left there, as in torch
    (the reference executor zero-fills its buffers, the compiled program does not).
    """
    d = b.d
    root = v.root()
    layout = root.type.layout
    if root.owner.name == "input" or layout.min_storage_size() != layout.numel:
        v = b.add(v.clone(), b.range_of(v))  # not contiguous(): that may be v itself
        root = v.root()
    storage = root.type.layout.min_storage_size()
    if storage == 0:
        return None
    rank = d.int(0, 3)
    sizes = [d.int(0, 4) for _ in range(rank)]
    strides = [d.int(0, 4) for _ in range(rank)]
    span = sum((n - 1) * s for n, s in zip(sizes, strides, strict=True) if n)
    if 0 in sizes:
        span = 0
    if span >= storage:
        return None
    offset = d.int(0, storage - 1 - span)
    return b.add(v.as_strided(sizes, strides, offset), b.range_of(v))


def _philox(b: Builder) -> Value:
    """Bits or uniform floats from the (single) Philox state input."""
    d, g = b.d, b.graph
    if b.state is None:
        # The state as a graph input of its own, a row of a (k, 6) input, or a row of a
        # flat input viewed as (2, 6): every backend reads it through its layout.
        how = d.choice(("own", "own", "row", "viewed"))
        if how == "row":
            b.state_input = g.input("state", (d.int(2, 3), 6), "uint32")
            b.state = b.state_input[d.int(0, b.state_input.shape[0] - 1)]
        elif how == "viewed":
            b.state_input = g.input("state", (12,), "uint32")
            b.state = b.state_input.view(2, 6)[d.int(0, 1)]
        else:
            b.state = b.state_input = g.input("state", (6,), "uint32")
    sizes = tuple(0 if d.chance(0.04) else d.choice(SIZE_CHOICES) for _ in range(d.int(0, 3)))
    if d.chance(0.6):
        bits, new_state = g.philox(b.state, sizes)
        b.add(new_state, Range(large=True))
        return b.add(bits, Range(large=True))
    dtype = d.choice(("float32", "float16", "bfloat16"))
    low, high = d.choice(((0.0, 1.0), (-2.0, 2.0), (1.0, 5.0)))
    values, new_state = g.philox_uniform(b.state, sizes, dtype, low, high)
    b.add(new_state, Range(large=True))
    return b.add(values, Range(neg=low < 0))


# --------------------------------------------------------------------------- inputs


def input_layout(d: Draw, sizes: tuple[int, ...]) -> Layout:
    """The caller's strides and offset for an input of `sizes` (see the module docstring)."""
    rank = len(sizes)
    kind = d.choice(("contiguous", "transposed", "sliced", "padded", "broadcast", "overlapping",
                     "sliced_transposed", "channels_last"))
    offset = d.int(0, 4)
    if kind == "contiguous" or not rank:
        return Layout(sizes, Layout.contiguous(sizes).strides, offset)
    if kind == "channels_last":  # NHWC (NDHWC) strides, now and then of a stepped slice
        order = {4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}.get(rank)
        if order is None:
            return Layout(sizes, Layout.for_order(sizes, d.permutation(rank)).strides, offset)
        steps = [d.int(1, 2) for _ in sizes] if d.chance(0.3) else [1] * rank
        big = Layout.for_order([n * s for n, s in zip(sizes, steps, strict=True)], order)
        return Layout(sizes, tuple(x * s for x, s in zip(big.strides, steps, strict=True)),
                      offset)
    if kind == "transposed":
        return Layout(sizes, Layout.for_order(sizes, d.permutation(rank)).strides, offset)
    if kind == "broadcast":
        strides = tuple(0 if d.chance(0.5) else s for s in Layout.contiguous(sizes).strides)
        return Layout(sizes, strides, offset)
    if kind == "overlapping":  # a sliding window: dim k steps by less than the inner span
        strides = tuple(d.int(1, 3) if k == rank - 1 else d.int(1, 4) for k in range(rank))
        return Layout(sizes, strides, offset)
    steps = [d.int(1, 2) if kind.startswith("sliced") else 1 for _ in sizes]
    gap = [d.int(0, 2) for _ in sizes]
    big_sizes = [n * s + g_ for n, s, g_ in zip(sizes, steps, gap, strict=True)]
    order = d.permutation(rank) if kind == "sliced_transposed" else list(range(rank))
    big = Layout.for_order(big_sizes, order)
    return Layout(sizes, tuple(x * s for x, s in zip(big.strides, steps, strict=True)), offset)


def input_tensor(d: Draw, layout: Layout, dtype: str, r: Range) -> torch.Tensor:
    """A tensor with exactly `layout` over a storage a few elements larger than needed,
    holding values of range `r`."""
    storage_size = layout.min_storage_size() + d.int(0, 3)
    gen = torch.Generator().manual_seed(d.int(0, 2**31 - 1))
    td = stridec.as_dtype(dtype).torch
    n = (storage_size,)
    if td == torch.bool:
        storage = torch.randint(0, 2, n, generator=gen).bool()
    elif r.large:
        if td.is_floating_point:
            storage = (torch.randn(n, generator=gen, dtype=torch.float64) * 1e4).to(td)
        else:
            info = torch.iinfo(td)
            storage = torch.randint(info.min, info.max, n, generator=gen,
                                    dtype=torch.int64).to(td)
    else:
        ints = torch.randint(-8 if r.neg else 0, 9, n, generator=gen)
        if td.is_floating_point:
            storage = ints.double() * 0.5
            if r.nan:
                special = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0],
                                       dtype=torch.float64)
                pick = torch.randint(0, 4, n, generator=gen)
                storage = torch.where(torch.rand(n, generator=gen) < 0.1, special[pick], storage)
            storage = storage.to(td)
        else:
            storage = ints.to(td)
    if td == torch.bool and d.chance(0.3):  # bytes 2 ... 255, each true, as torch reads it
        storage = torch.where(storage, torch.randint(2, 256, n, generator=gen), 0).to(
            torch.uint8).view(torch.bool)
    if storage.element_size() > 1 and storage.numel() and d.chance(0.15):
        storage = misaligned_copy(storage, d.int(1, storage.element_size() - 1))
    return torch.as_strided(storage, layout.sizes, layout.strides, layout.offset)


def misaligned_copy(t: torch.Tensor, shift: int) -> torch.Tensor:
    """A copy of the 1-D tensor `t` in a storage whose address is `shift` bytes past a
    multiple of 8 (torch makes such tensors: `frombuffer` at an odd offset, numpy views
    at odd byte offsets): element-misaligned where `shift` is not a multiple of the
    element size."""
    nbytes = t.numel() * t.element_size()
    raw = torch.empty(nbytes + 16, dtype=torch.uint8)
    start = (-raw.data_ptr()) % 8 + shift
    moved = torch.frombuffer(memoryview(raw.numpy())[start:start + nbytes], dtype=t.dtype)
    return moved.copy_(t)


def state_tensor(d: Draw, sizes: tuple[int, ...] = (6,)) -> torch.Tensor:
    """uint32 words, six per state (counters near 2^32 - 1 exercise the carry), laid out
    as a state is found in torch programs: contiguous, a row of a bigger (k, 6) tensor
    (at an offset), or a column of a (6, k) one (strided)."""
    words = []
    for _ in range(math.prod(sizes) // 6):
        words += [d.choice((0, 1, 5, 0xFFFFFFFF, 0xFFFFFFFE, 0x12345678)) for _ in range(4)]
        words += [d.choice((0, 0x9ABCDEF0, 0xFFFFFFFF)) for _ in range(2)]
    flat = torch.tensor(words, dtype=torch.int64).to(torch.uint32)
    how = d.choice(("contiguous", "row", "column"))
    if how == "contiguous":
        return flat.reshape(sizes)
    k = d.int(2, 3)
    if how == "row":  # row j of a (k, numel) tensor
        big = torch.zeros((k, flat.numel()), dtype=torch.uint32)
        j = d.int(0, k - 1)
        big[j] = flat
        return big[j].view(sizes)
    big = torch.zeros((flat.numel(), k), dtype=torch.uint32)  # column j: stride k
    j = d.int(0, k - 1)
    big[:, j] = flat
    column = big[:, j]
    return column.view(sizes) if len(sizes) == 1 else column.unflatten(0, sizes)


@dataclass(frozen=True)
class OutDraw:
    """Where one output goes under `out=`: a window of a fresh buffer (`order` of the dims,
    outermost first, each dim's extent padded by `pads`, at `offset`, `tail` bytes of
    buffer after it), or argument `argument` itself when not None."""

    order: tuple[int, ...]
    pads: tuple[int, ...]
    offset: int
    tail: int
    argument: int | None = None
    shift: int = 0  # the buffer's address this many bytes past a multiple of 8


@dataclass
class Case:
    graph: Graph
    tensors: list[torch.Tensor]
    outs: list[OutDraw] | None = None

    def describe(self) -> str:
        args = "\n".join(
            f"  {v.owner.attrs['name']}: sizes {list(t.shape)} strides {list(t.stride())} "
            f"offset {t.storage_offset()} "
            f"storage {t.untyped_storage().nbytes() // t.element_size()} {t.dtype}"
            for v, t in zip(self.graph.inputs, self.tensors, strict=True)
        )
        return f"{self.graph}\narguments:\n{args}"


def random_case(d: Draw, dtypes: tuple[str, ...] = DTYPES,
                casts: frozenset[tuple[str, str]] | None = None) -> Case:
    """A random graph and its arguments; `dtypes`: what its inputs, casts and fills are
    drawn from (fewer dtypes, fewer C classes: the sanitized profile); `casts`: the
    (source, destination) pairs its casts may be, any where None."""
    g = stridec.Graph("fuzz")
    b = Builder(d, g, dtypes=dtypes, casts=casts)
    declared: list[tuple[Value, Range]] = []
    for k in range(d.int(1, 3)):
        rank = d.choice((3, 4, 2, 1, 0, 5))
        big = rank and d.chance(0.1)
        limit = BIG_MAX_NUMEL if big else MAX_NUMEL
        b.limit = max(b.limit, limit)
        sizes: tuple[int, ...] = ()
        for _ in range(rank):
            n = 0 if d.chance(0.04) else d.choice(BIG_SIZE_CHOICES if big else SIZE_CHOICES)
            sizes += (n if math.prod(sizes) * n <= limit else d.choice((1, 2, 3)),)
        dtype = d.choice(dtypes)
        signed = dtype != "bool" and not dtype.startswith("uint")
        large = dtype != "bool" and d.chance(0.15)  # large values span the whole dtype
        r = Range(nan=is_float(dtype) and d.chance(0.2), neg=signed and (large or d.chance(0.5)),
                  large=large)
        v = g.input(f"x{k}", sizes, dtype)
        declared.append((v, r))
        b.add(v, r)
        if rank and d.chance(0.3):  # a negative-stride input, made through a view
            b.add(v.flip(*sorted({d.int(0, rank - 1) for _ in range(d.int(1, rank))})), r)
    for _ in range(d.int(3, 16)):
        v = b.values[-1] if d.chance(0.6) else d.choice(b.values)
        try:
            w = _step(b, v)
        except StridecError:  # e.g. expanding a dim that is not 1: rejected as torch does
            continue
        if w is not None:
            assert w in b.values
    # Every dead end is an output (so no work is dropped), and now and then any value.
    leaves = [w for w in b.values if not w.uses and w.owner.name != "input"]
    outputs = (leaves or b.values[-1:])[-4:]
    g.output(*outputs, *(d.choice(b.values) for _ in range(d.int(0, 1))))

    tensors = []
    for v in g.inputs:
        if v is b.state_input:
            tensors.append(state_tensor(d, v.shape))
            continue
        r = next(r for w, r in declared if w is v)
        tensors.append(input_tensor(d, input_layout(d, v.shape), v.dtype.name, r))
    # out= more often where an output is a fill (pad, pack): its runs may stream
    fills = any(v.owner.name in ("pad", "pack") for v in g.outputs)
    return Case(g, tensors, draw_outs(d, g, tensors) if d.chance(0.6 if fills else 0.35) else None)


def draw_outs(d: Draw, g: Graph, tensors: list[torch.Tensor]) -> list[OutDraw]:
    """An `out=` target per output; an argument of the output's sizes and dtype, whose
    elements are distinct, now and then (it is overwritten: the call must stage it)."""
    draws = []
    used: set[int] = set()
    for v in g.outputs:
        rank = v.type.rank
        matching = [
            k for k, t in enumerate(tensors)
            if k not in used and tuple(t.shape) == v.type.sizes and t.dtype == v.type.dtype.torch
            and not Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset()).may_overlap()
        ]
        if matching and d.chance(0.3):
            k = d.choice(matching)
            used.add(k)
            draws.append(OutDraw((), (), 0, 0, k))
            continue
        # A fill (pad, pack) streams its pattern into the out's runs: packed rows and an
        # element-misaligned address more often there (issue 31: the pattern rotated)
        fill = v.owner.name in ("pad", "pack")
        if d.chance(0.6 if fill else 0.3):  # what an out mostly is: packed rows
            order, pads = tuple(range(rank)), (0,) * rank
        else:
            order, pads = tuple(d.permutation(rank)), tuple(d.int(0, 2) for _ in range(rank))
        draws.append(OutDraw(order, pads, d.int(0, 3), d.int(0, 9),
                             shift=d.choice((1, 3, 5, 7) if fill else range(1, 8))
                             if d.chance(0.6 if fill else 0.2) else 0))
    return draws


# --------------------------------------------------------------------------- checking


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def assert_identical(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """Same sizes, dtype and bits (NaN equals NaN; -0.0 differs from +0.0)."""
    assert isinstance(got, torch.Tensor), f"{what}: expected a tensor; got {type(got).__name__}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), (
        f"{what}: sizes {list(got.shape)} != {list(want.shape)}")
    assert all(s >= 0 for s in got.stride()), f"{what}: negative strides {got.stride()}"
    if got.numel():
        storage = got.untyped_storage().nbytes() // got.element_size()
        reach = sum((n - 1) * s for n, s in zip(got.shape, got.stride(), strict=True))
        last = got.storage_offset() + reach
        assert last < storage, f"{what}: reaches element {last} of a storage of {storage}"
    if got.dtype == torch.bool:  # truth values: a bool copy may move a byte 2 ... 255
        same = (got.view(torch.uint8) != 0) == (want.view(torch.uint8) != 0)
    else:
        bits = _BITS[got.element_size()]
        a, b = got.contiguous().view(bits), want.contiguous().view(bits)
        same = a == b
        if got.dtype.is_floating_point:
            same |= got.isnan() & want.isnan()
    if not bool(same.all()):
        where = (~same).nonzero()[:5].tolist()
        raise AssertionError(
            f"{what}: differs at {where}: got {[got[tuple(i)].item() for i in where]}, "
            f"want {[want[tuple(i)].item() for i in where]}"
        )


def shared_inputs(out: torch.Tensor, inputs: list[torch.Tensor]) -> set[int] | None:
    """The inputs whose storage `out` is a view of; None where that cannot be told (an
    empty storage has no address of its own)."""
    if not out.untyped_storage().nbytes():
        return None
    ptr = out.untyped_storage().data_ptr()
    return {k for k, t in enumerate(inputs) if t.untyped_storage().data_ptr() == ptr}


def assert_same_place(got: torch.Tensor, want: torch.Tensor, inputs: list[torch.Tensor],
                      what: str) -> None:
    """Strides and offset as the reference (torch) has them, and the same inputs shared."""
    assert (got.stride(), got.storage_offset()) == (want.stride(), want.storage_offset()), (
        f"{what}: strides {got.stride()} offset {got.storage_offset()}; torch gives "
        f"{want.stride()} offset {want.storage_offset()}")
    if any(not t.untyped_storage().nbytes() for t in inputs):
        return
    have, expect = shared_inputs(got, inputs), shared_inputs(want, inputs)
    if have is not None and expect is not None:
        assert have == expect, (
            f"{what}: shares storage with inputs {sorted(have)}; torch's result with "
            f"{sorted(expect)}")


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


_SENTINEL_BYTE = 0xA5


def out_tensors(case: Case) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """The `out=` tensors of a case, and the byte buffer under each (None: an argument)."""
    assert case.outs is not None
    outs, buffers = [], []
    for v, o in zip(case.graph.outputs, case.outs, strict=True):
        if o.argument is not None:
            outs.append(case.tensors[o.argument])
            buffers.append(None)
            continue
        sizes = v.type.sizes
        strides = [0] * len(sizes)
        running = 1
        for dim in reversed(o.order):
            strides[dim] = running
            running *= sizes[dim] + o.pads[dim]
        dtype = v.type.dtype.torch
        item = torch.empty((), dtype=dtype).element_size()
        span = Layout(sizes, tuple(strides), o.offset).min_storage_size()
        raw = torch.full(((span + o.tail) * item,), _SENTINEL_BYTE, dtype=torch.uint8)
        if o.shift and raw.numel():
            raw = misaligned_copy(raw, o.shift)
        outs.append(torch.as_strided(raw.view(dtype), sizes, tuple(strides), o.offset))
        buffers.append(raw)
    return outs, buffers


def check_out_call(case: Case, compiled: Any, want: tuple) -> None:
    """The case called with `out=` (`case.outs`): each out equals the reference output
    and the bytes around each window keep the sentinel."""
    from stridec.runtime.backends.reference import layout_indices

    outs, buffers = out_tensors(case)
    versions = [o._version for o in outs]
    returned = _as_tuple(compiled(*case.tensors, out=tuple(outs)))
    for i, (r, o, w) in enumerate(zip(returned, outs, want, strict=True)):
        assert r is o, f"out {i}: the call returns its out tensors"
        assert_identical(o, w, f"out {i}")
        assert o._version > versions[i], f"out {i}: written, its version not bumped"
    for i, (o, raw) in enumerate(zip(outs, buffers, strict=True)):
        if raw is None:
            continue
        written = torch.zeros(raw.numel(), dtype=torch.bool)
        if o.numel():
            item = o.element_size()
            first = layout_indices(Layout(tuple(o.shape), tuple(o.stride()),
                                          o.storage_offset())).reshape(-1) * item
            for b in range(item):
                written[first + b] = True
        assert bool((raw[~written] == _SENTINEL_BYTE).all()), f"out {i}: wrote outside its window"


def backends_for(graph: Graph) -> tuple[str, ...]:
    """The compiled backends a case runs on: `cpu` always, and one case in three (fixed by
    its text) the interpreter too, which costs ~1 ms per program."""
    text = str(graph)
    return ("cpu", "interpret") if sum(text.encode()) % 3 == 0 else ("cpu",)


def check_case(case: Case, pipeline: str | None = None) -> None:
    """The compiled backends against the reference backend, on the same arguments (and
    with `out=` where the case draws outs). With a `pipeline` (any the compiler accepts),
    a compiled graph may refuse the call with a StridecError instead; whatever it returns
    must be right. One case in three (fixed by its text; two with an out off its
    alignment) streams every C store (the streaming threshold at 0: the paths of tensors
    past half the last-level cache)."""
    from stridec.runtime.backends import cpu

    shifted = case.outs is not None and any(o.shift for o in case.outs)
    streamed = (0, 2) if shifted else (2,)
    if sum(str(case.graph).encode()) % 3 not in streamed or not cpu.available():
        _check_case(case, pipeline)
        return
    previous = cpu.set_stream_threshold(0)
    try:
        _check_case(case, pipeline)
    finally:
        cpu.set_stream_threshold(previous)


def _check_case(case: Case, pipeline: str | None) -> None:
    reference = stridec.compile(case.graph, backend="reference")
    try:
        want = _as_tuple(reference(*case.tensors))
    except StridecError as e:
        for backend in backends_for(case.graph):
            with pytest.raises(type(e) if pipeline is None else StridecError):
                stridec.compile(case.graph, backend=backend, pipeline=pipeline)(*case.tensors)
        return
    snapshot = [t.clone() for t in case.tensors]
    for backend in backends_for(case.graph):
        compiled = stridec.compile(case.graph, backend=backend, pipeline=pipeline)
        try:
            got = _as_tuple(compiled(*case.tensors))
        except StridecError:
            if pipeline is None:
                raise
            continue
        assert len(got) == len(want)
        for i, (x, y) in enumerate(zip(got, want, strict=True)):
            assert_identical(x, y, f"{backend}: output {i}")
            assert_same_place(x, y, case.tensors, f"{backend}: output {i}")
        for i, (t, before) in enumerate(zip(case.tensors, snapshot, strict=True)):
            assert_identical(t, before, f"{backend}: argument {i} (inputs are never written)")
        if backend == "cpu" and pipeline is None and sum(str(case.graph).encode()) % 4 == 1:
            check_fake_call(compiled, case.tensors, got)
    if case.outs is not None and pipeline is None:
        # Once (an out may be an argument, written by the call), on the last backend; an
        # out may be an argument a view of which is `want`.
        check_out_call(case, compiled, tuple(w.clone() for w in want))


def check_fake_call(compiled: Any, tensors: list[torch.Tensor], got: tuple) -> None:
    """The call under a FakeTensorMode, on fake copies of `tensors`: fake results with the
    metadata of the real call's `got`, views of exactly the inputs those are views of."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    mode = FakeTensorMode()
    fakes = [mode.from_tensor(t) for t in tensors]
    with mode:
        fake = _as_tuple(compiled(*fakes))
    assert len(fake) == len(got)
    for i, (f, r) in enumerate(zip(fake, got, strict=True)):
        assert isinstance(f, FakeTensor), f"fake call: output {i} is a {type(f).__name__}"
        assert (f.shape, f.stride(), f.storage_offset(), f.dtype) == (
            r.shape, r.stride(), r.storage_offset(), r.dtype), f"fake call: output {i}"
        if not r.numel():  # an empty view may come back as new memory (nothing to alias)
            continue
        for k, (fx, x) in enumerate(zip(fakes, tensors, strict=True)):
            real = r.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            fake_shares = f.untyped_storage()._cdata == fx.untyped_storage()._cdata
            assert real == fake_shares, f"fake call: output {i} and input {k}"


# --------------------------------------------------------------------------- open bugs

#: Open bugs, each with a strict-xfail test in
#: test_regressions.py. Examples that show one are rejected (so the fuzzer keeps looking
#: for new ones); when a fix lands, its xfail test passes and fails as XPASS: delete the
#: mark there and the entry here.
KNOWN_BUGS: dict[str, Any] = {}


def known_bug(case: Case) -> str | None:
    return next((name for name, shows in KNOWN_BUGS.items() if shows(case)), None)


# --------------------------------------------------------------------------- the test


def _casts(config: pytest.Config) -> frozenset[tuple[str, str]] | None:
    """The casts the fuzzer draws: any with --fuzz-long, else the suite's pairs."""
    return None if config.getoption("--fuzz-long", default=False) else SUITE_CASTS


# Triton's interpreter casts with numpy, which warns where a value becomes inf (a uint32
# or a large float to float16): defined, and what torch gives too.
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_fuzz_graphs_against_the_reference(fuzz_settings: settings, fuzz_stats: Counter,
                                           pytestconfig: pytest.Config) -> None:
    """The examples are counted in the terminal summary: `examples` (graphs compiled and
    compared), `passed`, and `rejected <test>` for graphs that show an open bug."""
    casts = _casts(pytestconfig)

    @fuzz_settings
    @given(st.data())
    def run(data: Any) -> None:
        case = random_case(Draw(data), casts=casts)
        note(case.describe())
        bug = known_bug(case)
        if bug is not None:
            fuzz_stats[f"rejected {bug}"] += 1
        assume(bug is None)
        fuzz_stats["examples"] += 1
        check_case(case)
        fuzz_stats["passed"] += 1

    run()


def random_pipeline(d: Draw) -> str:
    """Some of the passes, in some order, each at most twice: a pipeline the compiler
    accepts, not necessarily one that lowers everything."""
    import stridec.compiler.passes  # noqa: F401 - registers every pass
    from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PASS_REGISTRY

    names = sorted(PASS_REGISTRY)
    if d.chance(0.5):  # the default, less some passes
        kept = [p for p in DEFAULT_PIPELINE.split(",") if d.chance(0.7)]
    else:
        kept = [d.choice(names) for _ in range(d.int(1, 8))]
    return ",".join(kept) or "dce"


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_fuzz_graphs_under_any_pipeline(fuzz_settings: settings, fuzz_stats: Counter,
                                        pytestconfig: pytest.Config) -> None:
    """A pipeline the compiler accepts either runs the graph right -- values, strides,
    storage shared -- or refuses it with a StridecError (a pass it needs is missing),
    never a raw error from torch or Triton. A tenth of the fuzzer's examples."""
    casts = _casts(pytestconfig)

    @settings(fuzz_settings, max_examples=max(fuzz_settings.max_examples // 10, 10))
    @given(st.data())
    def run(data: Any) -> None:
        d = Draw(data)
        case = random_case(d, casts=casts)
        pipeline = random_pipeline(d)
        note(f"pipeline: {pipeline}\n{case.describe()}")
        assume(known_bug(case) is None)
        fuzz_stats["pipelines"] += 1
        check_case(case, pipeline)

    run()


def test_the_generator_covers_every_op_and_input_kind() -> None:
    """Guard the generator: over fixed seeds, every op of the catalogue is built, every
    pack format is used, and inputs come empty, big, negative-strided and of every dtype."""
    ops: Counter = Counter()
    formats: set[str] = set()
    dtypes: set[str] = set()
    sizes: list[int] = []
    outs: Counter = Counter()
    for seed in range(400):  # (NCHW packs come first at seed 319)
        case = random_case(SeededDraw(seed))
        for o in case.outs or ():
            outs["argument" if o.argument is not None else "window"] += 1
        for op in case.graph.ops:
            ops[op.name] += 1
            if op.name == "pack":
                formats.add(op.attrs["format"].split("<")[0])
        for t in case.tensors:
            dtypes.add(str(t.dtype).removeprefix("torch."))
            sizes.append(t.numel())
    from stridec.ir.graph import OP_REGISTRY

    # The explicit copies are what the pipeline lowers every graph to, never written.
    lowered = {"strided_copy", "masked_copy", "framed_copy", "fill"}
    assert set(OP_REGISTRY) - set(ops) - lowered == set(), ops
    assert formats == {"NCHW", "NHWC", "NCHW4", "NCHW32", "NCHW64", "CHWN4", "pitched"}
    assert dtypes == set(DTYPES)
    assert 0 in sizes and max(sizes) > 4096
    assert outs["window"] > 50 and outs["argument"] > 0, outs
