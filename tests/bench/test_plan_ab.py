"""`bench/plan_ab.py`: the specs it records are the suite's copies, its two plans of a copy
write the same bytes as torch, and a change it makes to `copy_plan` is undone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import plan_ab  # noqa: E402
from stridec.compiler import copy_plan  # noqa: E402
from stridec.compiler.codegen.c.plan import plan_params  # noqa: E402
from stridec.compiler.codegen.spec import CopySpec  # noqa: E402
from stridec.ir.dtypes import DTYPES  # noqa: E402
from stridec.ir.layout import contiguous_strides  # noqa: E402

F32 = DTYPES["float32"]


def test_the_recorded_specs_are_the_rows_copies() -> None:
    specs = plan_ab.suite_specs("ttc", 0, ["ttc_021_*"], smoke=True)
    names = {name for name, _ in specs}
    assert names and all(name.startswith("ttc_021_") for name in names)
    for _, spec in specs:  # a (0,2,1) permutation: the innermost source dim moves
        assert len(spec.sizes) >= 2 and copy_plan.plan_copy(spec) is not None
    # planned again, not taken from a cache of the first time's programs
    assert plan_ab.suite_specs("ttc", 0, ["ttc_021_*"], smoke=True) == specs


def test_two_plans_of_a_transpose_write_what_torch_writes() -> None:
    sizes = (37, 53)
    spec = CopySpec(sizes, (1, 37), 0, contiguous_strides(sizes), 0, F32, F32)
    plans = copy_plan.candidate_plans(spec, limit=8)
    a, b = (plan_ab.Planned(p.elem_bytes, tuple(p.cast), plan_params(p), p.kernel)
            for p in (plans[0], next(p for p in plans if plan_params(p) != plan_params(plans[0]))))
    _, _, same = plan_ab.time_pair(spec, a, b, reps=1, flush=None)
    assert same
    src, dst = plan_ab._storages(spec)
    runs = plan_ab.launch.planned_copy_runs(4, [a.params], src, dst)
    runs[0]()
    x = src.view(torch.float32).as_strided(sizes, (1, 37))
    assert torch.equal(dst.view(torch.float32).view(sizes), x.contiguous())


def test_a_constant_changed_is_restored_and_unknown_names_refused() -> None:
    before = copy_plan.VECTOR_BYTES
    with plan_ab.changed({"VECTOR_BYTES": before + 100, "l1": 4096}) as caches:
        assert copy_plan.VECTOR_BYTES == before + 100 and caches.l1 == 4096
    assert copy_plan.VECTOR_BYTES == before
    with pytest.raises(SystemExit, match="NO_SUCH"):
        with plan_ab.changed({"NO_SUCH": 1}):
            pass


def test_the_command_runs_on_smoke_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """It times on one thread and leaves the process's thread count as it found it."""
    threads = torch.get_num_threads()
    assert plan_ab.main(["--suite", "ttc", "--smoke", "--only", "ttc_021_*", "--b",
                         "slow_streams=True", "--reps", "1", "--flush-mb", "0"]) == 0
    assert "copies of" in capsys.readouterr().out
    assert torch.get_num_threads() == threads
