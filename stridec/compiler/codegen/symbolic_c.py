"""The C kernels of copies over symbolic sizes (the `cpu` backend).

A C copy kernel already serves a class — one strategy, one pair of element types — and
takes every size, stride, offset and mask bound in an int64 array
(`codegen/c/copy.py`). Over symbolic sizes that array holds expressions: the copy is
canonicalized for every value of its symbols (`canonicalize_symbolic`, with `hint`, a
binding, ordering the dims), its strategy is the one `codegen.c.copy` picks at `hint`
where the unit strides it relies on are 1 for every value (else a gather), and the
parameters are `copy_params` of the symbolic canonical copy. `Program.bind` evaluates
them per call, so one compiled library and one plan serve every binding of the class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from stridec.compiler.codegen.c import copy as c
from stridec.compiler.codegen.spec import (
    CopySpec,
    bind_copy,
    canonicalize_symbolic,
    copy_symbols,
    is_fill_only,
)

__all__ = ["generate_c_copy_symbolic"]


def _plan(spec: CopySpec, hint: Mapping[str, int]) -> tuple[c.CopyClass, tuple] | None:
    """(class, symbolic params) of one copy, as `codegen.c.copy._plan` of a static one."""
    symbols = copy_symbols(spec)
    constants = {k: hint[k] for k in symbols if hint[k] in (0, 1)}
    if constants:
        spec = bind_copy(spec, constants)
    canon = canonicalize_symbolic(spec, hint) if copy_symbols(spec) else spec
    at = bind_copy(canon, hint)
    if at.numel == 0:
        return None
    fill_only = is_fill_only(at)
    if fill_only and canon.fill is None:
        return None
    canon, at = c._rank1(canon), c._rank1(at)
    if fill_only:  # nothing is read or converted: the class of a same-dtype copy
        canon = dataclasses.replace(canon, src_dtype=canon.dst_dtype)
    strategy, unit = c._choose(at, fill_only)
    if canon.dst_strides[-1] != 1:
        strategy, unit = "gather", None
    elif strategy == "linear" and not (fill_only or canon.src_strides[-1] == 1):
        strategy, unit = "gather", None
    elif strategy == "tiled_transpose" and (unit is None or canon.src_strides[unit] != 1):
        strategy, unit = "gather", None
    order = list(range(canon.rank))
    if unit is not None:  # the source's unit dim goes next to the innermost
        order.remove(unit)
        order.insert(len(order) - 1, unit)
    return c.copy_class(canon, strategy), c.copy_params(canon, order)


def generate_c_copy_symbolic(
    specs: Sequence[CopySpec], args: Sequence[tuple[int, int]], hint: Mapping[str, int]
) -> c.CCopyKernel:
    """The C kernel of `specs` (one copy launched as `(src, dst)`, or a batch into one
    buffer launched as `(dst, src_0, …)`: `args` gives each call's storages), its calls'
    parameters symbolic."""
    label = "copy" if len(specs) == 1 else "batch"
    return c.assemble_kernel(specs, args, label, lambda spec: _plan(spec, hint))
