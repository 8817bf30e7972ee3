"""Triton kernels for the `philox` op: Philox4x32-10 bits or uniforms, DirectML semantics.

One kernel writes one output of the op (docs/design.md#philox) through an arbitrary index
map, and its program 0 writes the advanced generator state. The iteration space of the kernel and
the philox output are related by two affine maps over the same coordinates `c`:

    logical index  i(c) = index_offset + Σ c_k · index_strides_k   (row-major in the philox sizes)
    destination    d(c) = dst_offset   + Σ c_k · dst_strides_k      (flat output storage)

and the kernel stores word `i mod 4` of Philox4x32-10(counter + ⌊i/4⌋, key) at `d`, or
`fill` where a mask (`lo <= Σ coeffs_k · c_k < hi`) fails. For a plain output both maps
are the contiguous strides of the sizes. An NCHW4 packing of a C = 3 output, for
instance, iterates `(n, co, ci, h, w)` over `(N, 1, 4, H, W)` with index strides
`(3HW, 4HW, HW, W, 1)`, destination strides `(4HW, 4HW, 1, 4W, 4)` and the mask
`0 <= 4·co + ci < 3`; with H = W = 2 (index strides `(12, 16, 4, 2, 1)`, destination
strides `(16, 16, 1, 8, 4)`), element `(0, 0, 1, 1, 1)` reads `i = 1·4 + 1·2 + 1·1 = 7`
and lands at `d = 1·1 + 1·8 + 1·4 = 13`.

Two kernel shapes:

* **linear** — the output is plainly contiguous (`i == position`, destination unit
  stride, no mask): each program takes `BLOCK` counters, runs Philox once per counter and
  stores its four words side by side (16-byte stores).
* **gather** — anything else: each program takes `BLOCK` positions of the iteration
  space, recovers coordinates by division by the runtime sizes, and runs Philox for the
  counter of each element (three of the four words are dropped).

Sizes, strides, offsets, mask coefficients and bounds, the element count and the state
increment are runtime scalars (`codegen.copy.KernelParams`: a 0 or 1 written in, a
multiple of 2, 4, 8 or 16 marked as one), so the source depends only on the kernel's
class (deterministic text, so Triton's cache hits); `BLOCK` is a `tl.constexpr`. Offsets
are int32 when every position, index and address the kernel forms stays below 2^31,
else int64 from the program id on (cast before any multiply).

Over symbolic sizes (`generate_philox(..., hint=...)`, a binding of the class) the same
scalars are expressions of the symbols (`symbolic_plan`: dims merged only where the
merge holds for every value), evaluated per call by the program's runner; the block and
the index width are chosen at the hint, an int32 kernel carrying the bounds (`limits`)
a binding must keep to run it.

The counter add is a 128-bit add done in 32-bit words: `q = ⌊i/4⌋` is split into its
low and high 32-bit halves and the carries run through words 1–3, so a counter near
2^32, 2^64, 2^96 or 2^128 − 1 carries (and wraps) exactly as the reference.

Uniforms use `u = float32(bits >> (32 - d)) · 2^-d` (`d` = `reference_philox.UNIFORM_BITS`
of the dtype: 24, 11 for float16, 8 for bfloat16) then `fma(u, scale, low)` with the float32
constants of `stridec.runtime.backends.reference_philox.uniform_scale`: an explicit
fused multiply-add rounds once on every backend, so Triton's FP contraction cannot
change the bits (except in the interpreter of Triton < 3.9, which computes `tl.fma` as a
multiply then an add: there the interpret backend warns once, see
`stridec.runtime.backends.interpret`). float16 is a plain round-to-nearest-even cast;
bfloat16 is rounded to nearest even on the integer bits, because Triton's interpreter
truncates in its own float32 -> bfloat16 cast while CUDA rounds.

The state is read on the device by every program, word k at `state_ptr + state_index[k]`
(so any layout of the 6 words is read in place, with no copy and no extra launch: a row
`states[1]` of a (k, 6) tensor reads addresses 6 … 11); program 0 also writes `new_state`,
contiguously.
`state` and `new_state` must therefore not overlap (`stridec.runtime.launch.launch_philox`
checks it): a program that starts after program 0 has stored would read the advanced
counter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from stridec.compiler.codegen.copy import KernelParams
from stridec.compiler.codegen.philox_plan import (
    UNIFORM_BITS,
    PhiloxPlan,
    PhiloxSpec,
    bind_philox,
    dst_elements,
    is_linear,
    philox_symbols,
    plans,
    symbolic_plan,
)
from stridec.errors import UnsupportedError
from stridec.ir.dtypes import DType
from stridec.ir.symbols import Sym, ceil_div, floor_div, free_symbols, statically_true

# The plan (`codegen.philox_plan`) is every target's; its names are re-exported here.
__all__ = [
    "UNIFORM_BITS", "PhiloxSpec", "PhiloxKernel", "bind_philox", "generate_philox",
    "philox_symbols", "plans", "symbolic_plan",
]

_INT32_LIMIT = 2**31 - 1
# Random123 philox.h constants, written here again rather than imported: the kernel and
# the reference in stridec.runtime.backends.reference_philox are kept independent so
# that one checks the other.
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
# Bit-pattern integer type of each output dtype (fills are written as bit patterns).
_BITS_OF = {4: "tl.int32", 2: "tl.int16"}


@dataclass(frozen=True)
class PhiloxKernel:
    """A generated philox kernel: its Triton module text and how to launch it.

    `constexprs` holds `(name, value)` pairs passed at launch; `dst_elements` is the
    smallest flat destination storage (in elements) the kernel may address; `strategy`
    is "linear", "gather" or "empty" (no element, only the state advances); `num_warps`
    is a launch option (ignored by the interpreter).
    """

    name: str
    kind: str
    source: str
    grid: tuple[int, ...]
    constexprs: tuple[tuple[str, int], ...]
    numel: int
    index_bits: int
    dst_dtype: DType
    dst_elements: int
    strategy: str
    num_warps: int = 4
    params: tuple[str, ...] = ()
    args: tuple[int, ...] = ()
    # A symbolic int32 kernel: groups of terms whose absolute values must sum within
    # 2^31 - 1 for a binding it runs (as `codegen.copy.index_limits`).
    limits: tuple[tuple[Any, ...], ...] = ()
    lang: ClassVar[str] = "triton"  # what its source is written in (`KernelInfo.lang`)


def _bound(sizes: tuple[int, ...], strides: tuple[int, ...], offset: int) -> int:
    """A bound on `|partial sum|` of `offset + Σ c_k·strides_k`, for the int32 check."""
    return abs(offset) + sum((s - 1) * abs(st) for s, st in zip(sizes, strides, strict=True))


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# --------------------------------------------------------------------------- emission


def _emit_rounds(lines: list[str]) -> None:
    """Emit Random123's ten Philox4x32 rounds on `x0..x3`, giving `y0..y3`.

    Inline in the kernel body: a nested `@triton.jit` helper would not run under the
    interpreter as `stridec.runtime.backends.interpret` drives it (no TRITON_INTERPRET at import).
    The key bump after the tenth round is dead code, dropped by the compiler.
    """
    lines += [
        "    # Philox4x32-10 (Random123): ten rounds, the key bumped by Weyl constants between.",
        "    k0 = key0",
        "    k1 = key1",
        "    for _ in tl.static_range(10):",
        f"        hi0 = tl.umulhi(x0, {PHILOX_M0:#x})",
        f"        hi1 = tl.umulhi(x2, {PHILOX_M1:#x})",
        f"        x0, x1, x2, x3 = hi1 ^ x1 ^ k0, x2 * {PHILOX_M1:#x}, "
        f"hi0 ^ x3 ^ k1, x0 * {PHILOX_M0:#x}",
        f"        k0 = k0 + {PHILOX_W0:#x}",
        f"        k1 = k1 + {PHILOX_W1:#x}",
        "    y0, y1, y2, y3 = x0, x1, x2, x3",
    ]


def _emit_state_reads(lines: list[str], state_index: tuple[int, ...],
                      params: KernelParams) -> None:
    lines.append("    # The state as uint32 words: counter ctr0 (low) .. ctr3, key key0 .. key1.")
    for k, (name, at) in enumerate(zip(("ctr0", "ctr1", "ctr2", "ctr3", "key0", "key1"),
                                       state_index, strict=True)):
        if isinstance(at, Sym):  # a row of a (K, 6) state tensor counted from its end
            at = params.value(f"sw{k}", at)
        lines.append(f"    {name} = tl.load(state_ptr + {at}).to(tl.uint32, bitcast=True)")


def _emit_counter_add(lines: list[str], q: str, wide: bool) -> None:
    """Emit `x0..x3 = counter + q` (mod 2^128) for the non-negative block index `q`."""
    lines.append(f"    lo = {q}.to(tl.uint32)")
    lines.append("    x0 = ctr0 + lo")
    lines.append("    carry = (x0 < ctr0).to(tl.uint32)")
    if wide:
        lines.append(f"    hi = ({q} >> 32).to(tl.uint32)")
        lines.append("    x1 = ctr1 + hi")
        lines.append("    carry1 = (x1 < ctr1).to(tl.uint32)")
        lines.append("    x1 = x1 + carry")
        lines.append("    carry = carry1 | (x1 < carry).to(tl.uint32)")
    else:
        lines.append("    x1 = ctr1 + carry")
        lines.append("    carry = (x1 < carry).to(tl.uint32)")
    lines.append("    x2 = ctr2 + carry")
    lines.append("    carry = (x2 < carry).to(tl.uint32)")
    lines.append("    x3 = ctr3 + carry")


def _emit_new_state(lines: list[str], params: KernelParams, numel: int) -> None:
    """Program 0 stores counter + ⌈numel/4⌉ (mod 2^128) and the key; the increment is two
    runtime words, `inc0` (low) and `inc1`."""
    blocks = ceil_div(numel, 4)
    if isinstance(blocks, Sym):  # the same words, as expressions (blocks < 2^63)
        w0 = params.value("inc0", blocks % 2**32)
        w1 = params.value("inc1", floor_div(blocks, 2**32))
    else:
        w0 = params.value("inc0", blocks & 0xFFFFFFFF)
        w1 = params.value("inc1", (blocks >> 32) & 0xFFFFFFFF)
    # Names of their own: a name rebound inside `if` must keep its type in compiled Triton.
    lines.append("    if pid == 0:")
    lines.append("        # new_state = counter + ceil(numel / 4)")
    lines.append(f"        n0 = ctr0 + {_u32(w0)}")
    lines.append("        n_carry = (n0 < ctr0).to(tl.uint32)")
    lines.append(f"        n1 = ctr1 + {_u32(w1)}")
    lines.append("        n_carry1 = (n1 < ctr1).to(tl.uint32)")
    lines.append("        n1 = n1 + n_carry")
    lines.append("        n_carry = n_carry1 | (n1 < n_carry).to(tl.uint32)")
    lines.append("        n2 = ctr2 + n_carry")
    lines.append("        n_carry = (n2 < n_carry).to(tl.uint32)")
    lines.append("        n3 = ctr3 + n_carry")
    for k, name in enumerate(("n0", "n1", "n2", "n3", "key0", "key1")):
        lines.append(f"        tl.store(new_state_ptr + {k}, {name}.to(tl.int32, bitcast=True))")


def _u32(word: int | str) -> str:
    """A 32-bit word as a uint32 term: a literal as it is, a parameter (an int32 or int64
    argument, by its value) as its low 32 bits. `tl.cast`, not `.to`: an argument of a
    symbolic kernel may be 1 at some binding, which Triton's JIT passes as a constexpr
    (a plain int, with no `.to`)."""
    return str(word) if isinstance(word, int) else f"tl.cast({word}, tl.uint32)"


def _emit_convert(lines: list[str], plan: PhiloxPlan, src: str) -> None:
    """Emit `val = <src words converted to the destination type>`."""
    if not plan.uniform:
        lines.append(f"    val = {src}.to(tl.int32, bitcast=True)")
        return
    d = UNIFORM_BITS[plan.dtype.name]
    lines.append(f"    u = ({src} >> {32 - d}).to(tl.float32) * {2.0**-d!r}")
    lines.append(f"    val = tl.fma(u, {plan.scale32!r}, {plan.low32!r})")
    if plan.dtype.name == "float16":
        lines.append("    val = val.to(tl.float16)  # round to nearest even")
    elif plan.dtype.name == "bfloat16":
        # Round to nearest even on the bits: the interpreter's own float32 -> bfloat16 cast
        # truncates, CUDA's rounds; this is exact on both (values are finite or inf).
        lines.append("    b = val.to(tl.uint32, bitcast=True)")
        lines.append("    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16")
        lines.append("    val = b.to(tl.uint16).to(tl.bfloat16, bitcast=True)")


def _linear_body(lines: list[str], plan: PhiloxPlan, wide: bool, params: KernelParams) -> None:
    lines.append("    # Linear output: BLOCK counters per program, four words stored per counter.")
    lines.append("    q = pid * BLOCK + tl.arange(0, BLOCK)")
    _emit_counter_add(lines, "q", wide)
    _emit_rounds(lines)
    lines.append("    # [BLOCK, 2, 2] -> [BLOCK, 4]: words in the order y0, y1, y2, y3.")
    lines.append("    words = tl.reshape(tl.join(tl.join(y0, y2), tl.join(y1, y3)), [BLOCK, 4])")
    _emit_convert(lines, plan, "words")
    lines.append("    i = q[:, None] * 4 + tl.arange(0, 4)[None, :]")
    offset = params.value("dst_off", plan.dst_offset)
    off = f"{offset} + " if offset != 0 else ""
    numel = params.value("numel", plan.numel)
    lines.append(f"    tl.store(dst_ptr + {off}i, val, mask=i < {numel})")


def _linear_form(coords: list[str], strides: list[int | str], offset: int | str) -> str:
    terms = [f"{c} * {s}" if s != 1 else c for c, s in zip(coords, strides, strict=True) if s != 0]
    if not terms:
        return f"p * 0 + {offset}"
    if offset != 0:
        terms.insert(0, str(offset))
    return " + ".join(terms)


def _gather_body(lines: list[str], plan: PhiloxPlan, wide: bool, params: KernelParams) -> None:
    rank = len(plan.sizes)
    v = params.value
    lines.append("    # Gather: BLOCK positions of the iteration space per program, one word each.")
    lines.append("    p = pid * BLOCK + tl.arange(0, BLOCK)")
    lines.append(f"    live = p < {v('space', plan.space_numel)}")
    coords = [f"c{k}" for k in range(rank)]
    if rank:
        lines.append("    # Coordinates in sizes sz<k>, innermost first.")
        lines.append("    r = p")
        for k in range(rank - 1, 0, -1):
            lines.append(f"    c{k} = r % {v(f'sz{k}', plan.sizes[k])}")
            lines.append(f"    r = r // {v(f'sz{k}', plan.sizes[k])}")
        lines.append("    c0 = r")
    index = [v(f"is{k}", x) for k, x in enumerate(plan.index_strides)]
    dst = [v(f"ds{k}", x) for k, x in enumerate(plan.dst_strides)]
    lines.append(f"    i = {_linear_form(coords, index, v('index_off', plan.index_offset))}")
    lines.append(f"    d = {_linear_form(coords, dst, v('dst_off', plan.dst_offset))}")
    if plan.masks:
        conds = []
        for n, (coeffs, lo, hi) in enumerate(plan.masks):
            terms = [v(f"mc{n}_{k}", c) for k, c in enumerate(coeffs)]
            lines.append(f"    m{n} = {_linear_form(coords, terms, 0)}")
            conds.append(f"({v(f'mlo{n}', lo)} <= m{n}) & (m{n} < {v(f'mhi{n}', hi)})")
        lines.append(f"    valid = {' & '.join(conds)}")
        lines.append("    i = tl.where(valid, i, 0)  # masked-out lanes may index anywhere")
    lines.append("    q = i >> 2")
    lines.append("    w = i & 3")
    _emit_counter_add(lines, "q", wide)
    _emit_rounds(lines)
    lines.append("    word = tl.where(w == 0, y0, tl.where(w == 1, y1, tl.where(w == 2, y2, y3)))")
    _emit_convert(lines, plan, "word")
    if plan.masks:
        bits_tl = _BITS_OF[plan.dtype.itemsize]
        elem = "tl.int32" if not plan.uniform else plan.dtype.triton
        lines.append(
            f"    fill = tl.full([BLOCK], {plan.fill_bits}, {bits_tl}).to({elem}, bitcast=True)"
        )
        lines.append("    val = tl.where(valid, val, fill)")
    lines.append("    tl.store(dst_ptr + d, val, mask=live)")


def _index_bits(plan: PhiloxPlan, linear: bool, block: int) -> int:
    if linear:
        blocks = -(-plan.numel // 4)
        bounds = [blocks + block, 4 * (blocks + block) + plan.dst_offset]
    else:
        s = plan.sizes
        bounds = [
            plan.space_numel + block,
            _bound(s, plan.index_strides, plan.index_offset),
            _bound(s, plan.dst_strides, plan.dst_offset),
        ] + [_bound(s, c, 0) for c, _, _ in plan.masks]
    return 32 if max(bounds) <= _INT32_LIMIT else 64


def _default_block(linear: bool, work: int, target: str, symbolic: bool = False) -> int:
    if target == "cpu":
        # The interpreter pays per program: few, large programs (over symbolic sizes,
        # not fewer than 2^10 lanes, the block serving larger bindings of the class too).
        return min(max(_next_pow2(work), 1 << 10 if symbolic else 16), 1 << 14)
    return 512 if linear else 1024


def _limits(plan: PhiloxPlan, linear: bool, block: int) -> tuple[tuple[Any, ...], ...]:
    """`_index_bits`'s bounds of a symbolic int32 plan, term by term: for each group, the
    sum of the terms' absolute values must stay within 2^31 - 1 for a binding to run
    the plan (`Program.fits`)."""
    if linear:
        blocks = ceil_div(plan.numel, 4)
        return ((blocks + block,), (4 * (blocks + block), plan.dst_offset))

    def terms(strides: tuple[Any, ...], offset: Any) -> tuple[Any, ...]:
        return (offset, *((n - 1) * st for n, st in zip(plan.sizes, strides, strict=True)))

    return ((plan.space_numel + block,), terms(plan.index_strides, plan.index_offset),
            terms(plan.dst_strides, plan.dst_offset),
            *(terms(c, 0) for c, _, _ in plan.masks))


def generate_philox(
    spec: PhiloxSpec, target: str = "cuda", block: int | None = None, num_warps: int = 4,
    hint: Mapping[str, int] | None = None,
) -> PhiloxKernel:
    """Generate the Triton kernel for `spec` on `target` ("cuda" or "cpu").

    `block` overrides the per-program block (a power of two): counters per program on
    the linear path, elements per program on the gather path; `num_warps` is the CUDA
    launch's warps per program. Bad specs raise `ShapeError` / `UnsupportedError` naming
    the field.

    A spec over symbolic sizes is generated for the class of the binding `hint`
    (`stridec.runtime.symbolic.binding_class`), as a copy is (`codegen.copy.plan_copy`):
    symbols that are 0 or 1 there become those constants; the dims are merged and the
    path (linear or gather) chosen for every value (`symbolic_plan`); every number that
    depends on the symbols is a runtime argument (an expression in `args` and `grid`,
    marked divisible by what divides it for every value of the class); the block and
    the index width are chosen at `hint`, an int32 kernel carrying the `limits` a
    binding must keep to run it.
    """
    if target not in ("cuda", "cpu"):
        raise UnsupportedError(f"philox: target must be 'cuda' or 'cpu'; got {target!r}")
    plan, at, hint = plans(spec, hint)
    empty = at.space_numel == 0
    if empty and isinstance(plan.space_numel, Sym):
        raise UnsupportedError(
            f"philox: the hint {hint} makes the space {plan.sizes} empty; plan for a "
            "binding that writes something"
        )
    linear = not empty and is_linear(plan)
    work = ceil_div(plan.numel, 4) if linear else plan.space_numel
    work_at = ceil_div(at.numel, 4) if linear else at.space_numel
    if block is None:
        block = _default_block(linear, work_at, target, hint is not None)
    if block < 1 or block & (block - 1):
        raise UnsupportedError(f"philox: block must be a power of two; got {block}")
    if num_warps < 1 or num_warps > 32 or num_warps & (num_warps - 1):
        raise UnsupportedError(f"philox: num_warps must be 1, 2, 4, … 32; got {num_warps}")
    index_bits = 32 if empty else _index_bits(at, linear, block)
    wide = index_bits == 64

    params = KernelParams(hint)
    lines: list[str] = []
    if empty:
        strategy = "empty"
        lines.append("    # Empty output: no element is written; only the state advances.")
    else:
        strategy = "linear" if linear else "gather"
    lines.append(
        "    pid = tl.program_id(0).to(tl.int64)" if wide else "    pid = tl.program_id(0)"
    )
    _emit_state_reads(lines, plan.state_index, params)
    if linear:
        _linear_body(lines, plan, wide, params)
    elif not empty:
        _gather_body(lines, plan, wide, params)
    _emit_new_state(lines, params, plan.numel)
    head = ["import triton", "import triton.language as tl", "", "", "@triton.jit"]
    names = ", ".join(["state_ptr", "dst_ptr", "new_state_ptr", *params.names])
    head.append(f"def __NAME__({names}, BLOCK: tl.constexpr):")
    head += [f"    {h}" for h in params.hints]
    text = "\n".join(head + lines) + "\n"
    name = "philox_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    source = text.replace("__NAME__", name)

    programs_at = 1 if empty else max(1, -(-work_at // block))
    if programs_at > _INT32_LIMIT:
        raise UnsupportedError(
            f"philox: {programs_at} programs of block {block} exceed the grid limit 2^31 - 1"
        )
    if isinstance(work, Sym) and not empty:
        programs = ceil_div(work, block)
        if not statically_true(programs >= 1):
            programs = floor_div(work + block, block)  # program 0 always writes new_state
        grid: tuple[Any, ...] = (programs,)
    else:
        grid = (programs_at,)
    limits = _limits(plan, linear, block) if hint is not None and index_bits == 32 else ()
    return PhiloxKernel(
        name=name,
        kind="philox",
        source=source,
        grid=grid,
        constexprs=(("BLOCK", block),),
        numel=plan.numel,
        index_bits=index_bits,
        dst_dtype=plan.dtype,
        dst_elements=dst_elements(plan, at),
        strategy=strategy,
        num_warps=num_warps,
        params=tuple(params.names),
        args=tuple(params.values),
        limits=tuple(lim for lim in limits if free_symbols(lim)),
    )
