"""Triton code generation for a group of copies into one buffer: one kernel, one launch.

`cat([a, b, c], dim)` lowers to three copies, each into its own slice of one buffer
(`lower-formats`); launched one by one they cost three launches where torch's cat costs
one. `generate_copy_batch(specs, target)` makes one `@triton.jit` kernel
`(dst_ptr, src_ptr_0, …, src_ptr_{k-1}, <runtime scalars>, <block constexprs>)` of all
of them: each
member is planned by `plan_copy` exactly as alone (strategy, tiles, index width), and
program `p` of the batch runs program `p - base_j` of member `j`, where
`base_j = Σ_{i<j} programs_i`. For members of 4, 6 and 2 programs:

    program = tl.program_id(0)
    if program < end0:                   # member 0: programs [0, 4), end0 = 4
        m0_pid = program
        …                                # member 0's body, its names prefixed `m0_`
    elif program < end1:                 # member 1: programs [4, 10), end1 = 10
        m1_pid = program - end0
        …
    else:                                # member 2: programs [10, 12)
        m2_pid = program - end1
        …

The ends are runtime scalars like the members' sizes and strides (`m1_n0`, …;
`codegen.copy.KernelParams`), so the source depends only on the members' classes.

Each body is `emit_copy_body` of its plan with every variable prefixed per member
(`m1_x0`), its block constexprs too (`M1_BLOCK_R`) and its source pointer numbered
(`src_ptr_1`): no two branches share a name, so Triton's `scf.if` yields nothing and a
member may index in int64 beside an int32 one. Programs run in any order, so the caller
promises that the members write disjoint addresses of the destination and that none
reads the destination (`lower_to_program` checks both: disjoint boxes of one buffer).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from stridec.compiler.codegen.copy import (
    BODY_LOCALS,
    CopyPlan,
    GeneratedKernel,
    KernelParams,
    describe_plan,
    describe_values,
    emit_copy_body,
    emit_hints,
    index_limits,
    kernel_module,
    plan_copy,
    plan_spans,
    plan_valid_for,
    touched_spans,
)
from stridec.compiler.codegen.spec import CopySpec, Tuning
from stridec.errors import UnsupportedError
from stridec.ir.symbols import Sym, evaluate

__all__ = ["CopyBatchKernel", "batch_strategy", "emit_batch_source", "generate_copy_batch"]


def batch_strategy(strategies: Sequence[str]) -> str:
    """The strategy a batch reports: its members', in order, e.g. "batch(linear,gather)"."""
    return f"batch({','.join(strategies)})"


def _member_body(
    plan: CopyPlan, j: int, base: int | str, indent: str, params: KernelParams
) -> list[str]:
    """`plan`'s body as member `j` of a batch: programs from `base`, names its own (its
    runtime scalars, added to `params`, too: `m<j>_n0`, …)."""
    own = KernelParams(plan.hint)
    body = emit_copy_body(plan, "program", base, own)
    blocks = re.compile(r"(?<![\w.])(" + "|".join(plan.block_names) + r")(?!\w)")
    scalars = (
        re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, own.names)) + r")(?!\w)")
        if own.names else None
    )
    lines = []
    for line in body:
        if scalars is not None:
            line = scalars.sub(lambda m: f"m{j}_{m.group(1)}", line)
        line = BODY_LOCALS.sub(lambda m: f"m{j}_{m.group(1)}", line)
        line = blocks.sub(lambda m: f"M{j}_{m.group(1)}", line)
        line = re.sub(r"(?<![\w.])src_ptr(?!\w)", f"src_ptr_{j}", line)
        lines.append(f"{indent}{line}")
    for name, value in zip(own.names, own.values, strict=True):
        params.value(f"m{j}_{name}", value)
    return lines


def emit_batch_source(plans: Sequence[CopyPlan], name: str) -> tuple[str, KernelParams]:
    """The module text of one kernel `name` running every plan of `plans` (see above), and
    its runtime scalars: where each member's programs end (`end<j>`), then each member's
    own. A member of no programs (every element masked, none written) gets no branch."""
    header = [f"# stridec copy batch: {len(plans)} copies into one buffer, one launch"]
    # A symbolic member runs programs for every binding of its class (no symbol is 0).
    running = [j for j, p in enumerate(plans) if isinstance(p.grid[0], Sym) or p.grid[0]]
    hints = [p.hint for p in plans if p.hint is not None]
    params = KernelParams({k: v for h in hints for k, v in h.items()})
    body = ["    program = tl.program_id(0)"] if running else ["    pass  # nothing to copy"]
    base: int | str = 0
    total = 0
    for j, plan in enumerate(plans):
        programs = plan.grid[0]
        header.append(f"# member {j}: strategy={plan.strategy}, index_bits={plan.index_bits}")
        header += [f"#   {line[2:]}" for line in describe_plan(plan)[1:]]
        if j not in running:
            continue
        total += programs
        last = j == running[-1]
        end = total if last else params.value(f"end{j}", total, specialize=False)
        if len(running) == 1:
            body += _member_body(plan, j, base, "", params)
        else:
            if last:
                body.append("    else:")
            else:
                keyword = "if" if j == running[0] else "elif"
                body.append(f"    {keyword} program < {end}:")
            body += _member_body(plan, j, base, "    ", params)
        base = end
    names = ["dst_ptr"] + [f"src_ptr_{j}" for j in range(len(plans))] + params.names
    names += [f"M{j}_{n}: tl.constexpr" for j, p in enumerate(plans) for n in p.block_names]
    # Every hint at the top, outside the branches: a parameter re-derived inside one would
    # be yielded by Triton's `scf.if`.
    return kernel_module(header, name, names, emit_hints(params) + body), params


@dataclass(frozen=True, slots=True)
class CopyBatchKernel(GeneratedKernel):
    """A generated batch of copies into one destination (a `plan.kernels` entry of kind
    "copy"): `stridec.runtime.launch.launch_copy_batch(kernel, dst_storage, *src_storages)`
    runs it on flat storages from element 0, one source per spec (a fill's is never read)."""

    specs: tuple[CopySpec, ...]
    # Per member: addresses it may touch, as `CopyKernel.src_span` and `dst_span`.
    src_spans: tuple[tuple[int, int] | None, ...]
    dst_spans: tuple[tuple[int, int] | None, ...]
    kind: str = "copy"
    # Symbolic members: every member's plan (`bound` evaluates them for one binding).
    plans: tuple[CopyPlan, ...] | None = field(default=None, hash=False, compare=False)
    limits: tuple[tuple[int | Sym, ...], ...] = ()  # as `CopyKernel.limits`, every member's

    @property
    def symbolic(self) -> bool:
        return self.plans is not None

    def valid_for(self, bindings: Mapping[str, int]) -> bool:
        """Whether every member runs its copy for `bindings` (`plan_valid_for`)."""
        return self.plans is None or all(plan_valid_for(p, bindings) for p in self.plans)

    def bound(self, bindings: Mapping[str, int]) -> tuple[
        tuple[int, ...], tuple[int, ...], tuple[tuple[tuple[int, int] | None, ...], ...]
    ]:
        """(grid, args, ((src_span, dst_span) of each member)) for `bindings`."""
        assert self.plans is not None
        spans = tuple(plan_spans(p, bindings) if p.symbolic else touched_spans(p)
                      for p in self.plans)
        return evaluate(self.grid, bindings), evaluate(self.args, bindings), spans


def _member_tunings(
    specs: Sequence[CopySpec], target: str, tuning: Tuning | None
) -> list[Tuning | None]:
    """`tuning` split over the members (sweeps in `bench/tune.py` pass one per program).

    A strategy "batch(s_0,…,s_{k-1})", as a batch reports it, gives member j strategy s_j;
    any other applies to every member. Blocks listing every member's tile axes in order
    (the order of `CopyBatchKernel.constexprs`) give member j its own slice; blocks of
    another length apply to each member. `num_warps` applies to all.
    """
    if tuning is None:
        return [None] * len(specs)
    strategies = [tuning.strategy] * len(specs)
    given = tuning.strategy or ""
    if given.startswith("batch(") and given.endswith(")"):
        strategies = given[len("batch("):-1].split(",")
        if len(strategies) != len(specs):
            raise UnsupportedError(
                f"copy batch: tuning strategy {given!r} must name one strategy per copy "
                f"({len(specs)}); got {len(strategies)}"
            )
    if tuning.blocks is None:
        return [Tuning(s, None, tuning.num_warps) for s in strategies]
    blocks = tuple(tuning.blocks)
    axes = [
        len(plan_copy(spec, target, Tuning(s)).block_names)
        for spec, s in zip(specs, strategies, strict=True)
    ]
    if len(blocks) != sum(axes):
        return [Tuning(s, blocks, tuning.num_warps) for s in strategies]
    tunings: list[Tuning | None] = []
    start = 0
    for s, n in zip(strategies, axes, strict=True):
        tunings.append(Tuning(s, blocks[start:start + n], tuning.num_warps))
        start += n
    return tunings


def generate_copy_batch(
    specs: Sequence[CopySpec], target: str = "cuda", tuning: Tuning | None = None,
    hint: Mapping[str, int] | None = None,
) -> CopyBatchKernel:
    """One kernel running every copy of `specs`, each planned by `plan_copy` as alone (with
    its share of `tuning`, `_member_tunings`, and for copies over symbolic sizes the
    class of the binding `hint`); they must share a destination dtype, write disjoint
    addresses and not read the destination. Where members are symbolic, so are the
    kernel's arguments, grid and the ends of the members' programs
    (`CopyBatchKernel.bound`)."""
    specs = tuple(specs)
    if not specs:
        raise UnsupportedError("copy batch: expected at least one copy; got none")
    dtypes = {s.dst_dtype for s in specs}
    if len(dtypes) != 1:
        raise UnsupportedError(
            "copy batch: every copy must write one destination dtype; "
            f"got {sorted(map(str, dtypes))}"
        )
    plans = [
        plan_copy(spec, target, t, hint)
        for spec, t in zip(specs, _member_tunings(specs, target, tuning), strict=True)
    ]
    placeholder = "stridec_copy_batch_KERNEL"
    text, params = emit_batch_source(plans, placeholder)
    name = f"stridec_copy_batch_{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    spans = [(None, None) if p.symbolic else touched_spans(p) for p in plans]
    return CopyBatchKernel(
        name=name,
        strategy=batch_strategy([p.strategy for p in plans]),
        source=text.replace(placeholder, name),
        grid=(sum(p.grid[0] for p in plans),),
        constexprs={f"M{j}_{n}": b for j, p in enumerate(plans) for n, b in p.constexprs.items()},
        numel=sum(p.numel for p in plans),
        index_bits=max(p.index_bits for p in plans),
        num_warps=max(p.num_warps for p in plans),
        target=target,
        params=tuple(params.names),
        args=tuple(params.values),
        detail="\n".join(
            f"member {j}: " + "\n  ".join(describe_values(p)) for j, p in enumerate(plans)
        ),
        specs=specs,
        src_spans=tuple(s for s, _ in spans),
        dst_spans=tuple(d for _, d in spans),
        plans=tuple(plans) if any(p.symbolic for p in plans) else None,
        limits=tuple(lim for p in plans for lim in index_limits(p)),
    )
