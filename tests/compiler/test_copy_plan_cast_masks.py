"""Casts with masks and fills on the planned library (`codegen/c/lib/copy_plan.c`): pads,
padded packs (NCHW4/32, CHWN4), masked gathers, flips and strided slices, and unpacks
that leave masked points unwritten, converting from storages of special values (NaN
payloads, infinities, -0.0, subnormals, out-of-range values) with fills of special values
in the destination's type (-0.0, NaN, infinities), every candidate plan, on 1 and 3
threads, streamed and not, bit for bit against torch's `.to()` and `F.pad`; and the same
on storages next to pages the process may not touch."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import random
import subprocess
import sys

import pytest
import torch

from stridec.compiler.codegen.c import plan as cplan
from stridec.compiler.codegen.c.copy import generate_c_copy
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.compiler.copy_plan import candidate_plans
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu
from tests.compiler.c_build import needs_gcc
from tests.compiler.test_codegen_c_copy import _team
from tests.compiler.test_codegen_copy import index_grid, reference_copy, span, valid_grid
from tests.compiler.test_copy_plan_bounds import ROOT, guarded_storage
from tests.compiler.test_copy_plan_casts import (
    KERNEL_PAIRS,
    _bits,
    _fn,
    _special_storage,
    _to,
)
from tests.compiler.test_copy_plan_masks import pack_case, pad_case

pytestmark = needs_gcc


def _fills(dst: str) -> list:
    if dst == "bool":
        return [True, False]
    if DTYPES[dst].is_floating:
        return [-0.0, float("nan"), float("inf"), float("-inf"), 0.1, 1e-40]
    return [-3, 0, 100]


def cast_cases(rng: random.Random, src: str, dst: str) -> list[CopySpec]:
    """Masked copies of every kind the library takes, from `src` to `dst`."""
    s, d = DTYPES[src], DTYPES[dst]
    specs = [pad_case(rng, "float32", rank)[2] for rank in (1, 2, 3, 4, 2, 3)]
    specs += [pack_case(rng, "float32", k, chwn)[2]
              for k, chwn in ((4, False), (4, False), (32, False), (4, True))]
    f32 = DTYPES["float32"]
    specs += [
        # a masked strided slice, flip and transpose: a pad of x[:, ::3], of x.flip(1), of a
        # transpose's columns; a masked gather into every third element
        CopySpec((9, 40), (130, 3), -3, (40, 1), 0, f32, f32, (MaskBound((0, 1), 1, 39),), 0),
        CopySpec((9, 80), (90, -1), 85, (80, 1), 0, f32, f32,
                 (MaskBound((0, 1), 5, 76), MaskBound((1, 0), 1, 8)), 0),
        CopySpec((40, 9), (1, 41), 0, (1, 40), 0, f32, f32, (MaskBound((0, 1), 2, 7),), 0),
        CopySpec((19, 23), (23, 1), 0, (70, 3), 0, f32, f32, (MaskBound((0, 1), 2, 20),), 0),
        # NCHW -> NHWC of 3 channels padded along W: masks along the lanes' pixels
        CopySpec((2, 5, 40, 3), (570, 38, 1, 190), -1, (600, 120, 3, 1), 0, f32, f32,
                 (MaskBound((0, 0, 1, 0), 1, 39),), 0),
        # an unpack: masked points left as they are
        CopySpec((2, 4, 9, 31), (1116, 1, 124, 4), 0, (837, 279, 31, 1), 0, f32, f32,
                 (MaskBound((0, 1, 0, 0), 0, 3),), None),
        # a large pad of a transpose: blocks wholly valid, wholly masked and mixed
        CopySpec((300, 70), (1, 300), -301, (70, 1), 0, f32, f32,
                 (MaskBound((1, 0), 1, 299), MaskBound((0, 1), 1, 69)), 0),
    ]
    fills = _fills(dst)
    return [dataclasses.replace(spec, src_dtype=s, dst_dtype=d,
                                fill=None if spec.fill is None else rng.choice(fills))
            for spec in specs]


def expected(spec: CopySpec, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """torch's destination storage: the source storage converted by `.to()` (its vector
    loop, the oracle), then moved, with the fill where the masks do not hold."""
    converted = _to(src, spec.dst_dtype.name)
    return reference_copy(dataclasses.replace(spec, src_dtype=spec.dst_dtype), converted, dst)


def run_plan(fn, plan, spec: CopySpec, src: torch.Tensor, dst: torch.Tensor, threads: int,
             stream: bool) -> None:
    params = cplan.plan_params(dataclasses.replace(plan, parallel=threads))
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        with _team(True, threads):
            fn(src.data_ptr(), dst.data_ptr(), (ctypes.c_int64 * len(params))(*params), threads)
    finally:
        cpu.set_stream_threshold(previous)


def _sentinel(name: str, n: int) -> torch.Tensor:
    return torch.full((n * DTYPES[name].itemsize,), 0x5A, dtype=torch.uint8).view(
        DTYPES[name].torch)


def source_span(spec: CopySpec) -> int:
    """One past the largest source address a valid element reads (a pad's masked ones
    lie outside the storage, some before it)."""
    idx = index_grid(spec.sizes, spec.src_strides, spec.src_offset)[valid_grid(spec)]
    assert idx.numel() == 0 or int(idx.min()) >= 0, spec
    return int(idx.max()) + 1 if idx.numel() else 1


@pytest.mark.parametrize(("src", "dst"), KERNEL_PAIRS, ids=lambda n: n)
def test_masked_casts_match_torch(src, dst):
    fn = _fn(src, dst)
    rng = random.Random(f"{src}{dst}")
    met = set()
    cases = cast_cases(rng, src, dst)
    storage = _special_storage(src, max(source_span(spec) for spec in cases))
    for spec in cases:
        plans = candidate_plans(spec, limit=3)
        assert plans and all(p.cast == (src, dst) for p in plans), spec
        out_n = span(spec, spec.dst_strides, spec.dst_offset) + 3
        for plan in plans:
            met.add(plan.kernel)
            for threads, stream in ((1, False), (3, True)):
                out = _sentinel(dst, out_n)
                want = expected(spec, storage, out)
                run_plan(fn, plan, spec, storage, out, threads, stream)
                assert torch.equal(_bits(out), _bits(want)), (plan.describe(), spec)
    assert met >= {"rows", "transpose", "interleave", "gather", "compress", "reverse"}, met


def test_the_c_target_runs_masked_casts_on_the_library():
    # An NCHW -> NCHW4 pack of 3 channels padded with -0.0, float16 -> float32, and a pad
    # of a transpose: once the strategies' masked casts, now the pair's library.
    rng = random.Random(3)
    f16, f32 = DTYPES["float16"], DTYPES["float32"]
    pack = dataclasses.replace(pack_case(rng, "float32", 4)[2], src_dtype=f16, dst_dtype=f32,
                               fill=-0.0)
    pad = dataclasses.replace(pad_case(rng, "float32", 3)[2], src_dtype=f16, dst_dtype=f32)
    for spec in (pack, pad):
        kernel = generate_c_copy(spec)
        assert [call[0] for call in kernel.calls] == [cplan.plan_symbol(2, ("float16",
                                                                             "float32"))]
    # A cast that only fills reads nothing: the destination dtype's fill.
    fill = CopySpec((50, 70), (0, 0), 0, (70, 1), 0, f16, f32, (MaskBound((0, 0), 1, 1),), 2.5)
    assert generate_c_copy(fill).calls[0][0] == cplan.plan_symbol(4)


def run_guarded(seed: int) -> int:
    """Every candidate plan of the masked casts of `cast_cases` (two pairs) on storages that
    end, or start, at a page the process may not touch, against torch; the plans run."""
    rng = random.Random(seed)
    ran = 0
    for src, dst in (("float32", "float16"), ("uint8", "float32")):
        fn = _fn(src, dst)
        for spec in cast_cases(rng, src, dst):
            size, out_size = DTYPES[src].itemsize, DTYPES[dst].itemsize
            src_n = source_span(spec)
            dst_n = span(spec, spec.dst_strides, spec.dst_offset)
            values = _special_storage(src, src_n)[:src_n]
            for plan in candidate_plans(spec, limit=3):
                for at_end, threads, stream in ((True, 1, False), (False, 3, True)):
                    s = guarded_storage(src_n * size, at_end).view(DTYPES[src].torch)
                    d = guarded_storage(dst_n * out_size, not at_end).view(DTYPES[dst].torch)
                    s.copy_(values)
                    d.copy_(_sentinel(dst, dst_n))
                    want = expected(spec, s, d)
                    run_plan(fn, plan, spec, s, d, threads, stream)
                    assert torch.equal(_bits(d), _bits(want)), (plan.describe(), spec)
                    ran += 1
    return ran


def test_masked_casts_stay_inside_their_storages():
    script = ("from tests.compiler.test_copy_plan_cast_masks import run_guarded\n"
              f"print(run_guarded({random.randrange(1 << 30)}))")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (script, done.returncode, done.stderr[-3000:])
    assert int(done.stdout.split()[-1]) >= 40
