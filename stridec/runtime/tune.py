"""Measured choice of copy plans, `stridec.compile(graph, tune=...)` (docs/cpu.md,
"Measured choice"): where the copy planner's model ranks several plans of a copy
(`codegen/c/plan.ranked_plans`), the first call of a specialization times them and runs
the fastest, as FFTW's planner does in its measuring modes and HPTT in its measured
mode. Off by default; off, every copy runs the model's first plan and nothing is timed
or read from the wisdom.

Timing, made for a noisy shared machine: the plans run on scratch storages of the copy's
extent (the caller's tensors are never touched), warmed by one untimed call, then in
rounds, each round calling every plan once (`repeats` calls a sample, enough for a
sample to last `SAMPLE_SECONDS`), the order rotated from round to round. A plan's time
in a round is divided by the model's first plan's in the same round, so load that comes
and goes hits both; a plan replaces the model's only where the median of those ratios and
the ratio of the median times are both at most `1 - MIN_GAIN` and it was the faster of
the two in `WIN_SHARE` of the rounds.

Budget: `tune` seconds of measuring (True: `DEFAULT_BUDGET`) for each specialization,
all its copies together; no sample starts that would end past it (its time estimated
from the samples before). A copy measured for fewer than `MIN_ROUNDS` rounds keeps the
model's plan, and its program is kept in memory only; the wisdom records the budget that
cut it short (`cut_at`), so a later call measures again only with more budget than that.

Wisdom: each measured choice is kept in the disk cache (`cache.write_wisdom`), keyed by
the library (its source, the compiler and host CPU: `cpu.unit_key`), the thread count
and every candidate's argument block, so a changed planner, machine or thread count
never reads another's choice. A later specialization with the same copy -- any graph, any
process -- takes it without timing, even with a budget of 0 (`tune=0`: wisdom only). An
entry that cannot be read is removed with a warning, and the copy measured again, or
run as the model plans it where no budget is left.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import _disable_current_modes

from stridec.compiler.codegen.c.plan import plan_params, plan_unit_source
from stridec.compiler.codegen.spec import CopySpec
from stridec.compiler.copy_plan import CopyPlan
from stridec.errors import CallError
from stridec.ir.affine import address_span
from stridec.runtime import launch
from stridec.runtime.backends.cpu import unit_key
from stridec.runtime.cache import read_wisdom, remove_wisdom, write_wisdom

__all__ = ["DEFAULT_BUDGET", "MIN_GAIN", "MIN_ROUNDS", "Choice", "Tuner", "tune_budget",
           "wisdom_key"]

logger = logging.getLogger(__name__)

DEFAULT_BUDGET = 3.0  # seconds of measuring a specialization, `tune=True`
MIN_GAIN = 0.05  # a plan replaces the model's only where it takes at most 95 % of its time
WIN_SHARE = 0.75  # ... and was faster than it in three rounds of four
MIN_ROUNDS = 3
MAX_ROUNDS = 9
SAMPLE_SECONDS = 2e-4  # a sample repeats a short copy until it lasts about this long
MAX_SCRATCH_BYTES = 1 << 30  # larger copies keep the model's plan (no scratch that size)
FIRST_CALL_BYTES_PER_SECOND = 1e9  # the time of a copy's first call, before any is timed
WISDOM_FORMAT = 1

# The clock the tuner reads (tests replace it).
clock: Callable[[], float] = time.perf_counter


def tune_budget(tune: object) -> float | None:
    """The budget in seconds `compile`'s `tune` asks for: None for False (off), the
    default for True, the number itself for one >= 0; CallError for anything else."""
    if tune is False or tune is None:
        return None
    if tune is True:
        return DEFAULT_BUDGET
    if isinstance(tune, (int, float)) and not isinstance(tune, bool):
        value = float(tune)
        if value >= 0 and math.isfinite(value):
            return value
    raise CallError(f"compile: tune must be False, True or a budget in seconds >= 0; "
                    f"got {tune!r}")


def wisdom_key(elem_bytes: int, blocks: Sequence[tuple[int, ...]], threads: int,
               cast: tuple[str, str] = ()) -> str:
    """The wisdom key of a copy: its library (of `elem_bytes`-byte elements, or of the
    cast `cast`), the thread count and its candidates."""
    text = json.dumps([WISDOM_FORMAT, unit_key(plan_unit_source(elem_bytes, tuple(cast))),
                       threads, [list(b) for b in blocks]])
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Choice:
    """What measured choice did for one copy: `candidates` plans, the one it runs
    (`chosen`, 0: the model's first), `how` ("measured", "wisdom", or why it kept the
    model's plan: "budget", "too large"), the rounds timed and each plan's median ratio
    to the model's first."""

    candidates: int
    chosen: int
    how: str
    rounds: int = 0
    ratios: tuple[float, ...] = ()


@dataclass
class Tuner:
    """The chooser of one specialization's copies (`codegen/c/plan.choosing`), with
    `budget` seconds of measuring in all; `choices` records each copy's `Choice`,
    `seconds` the time measuring took, `complete` whether every copy that needed
    measuring was measured (else the program is not kept on disk)."""

    budget: float
    choices: list[Choice] = field(default_factory=list)
    seconds: float = 0.0
    complete: bool = True

    def __call__(self, spec: CopySpec, plans: list[CopyPlan]) -> CopyPlan:
        blocks = [plan_params(p) for p in plans]
        elem_bytes, cast = plans[0].elem_bytes, plans[0].cast
        threads = torch.get_num_threads()
        key = wisdom_key(elem_bytes, blocks, threads, cast)
        available = max(0.0, self.budget - self.seconds)
        chosen = self._wisdom(key, blocks, available)
        if chosen is not None:
            self.choices.append(Choice(len(plans), chosen, "wisdom"))
            return plans[chosen]
        choice = self._measure(spec, plans[0], blocks)
        self.choices.append(choice)
        if choice.how == "measured":
            write_wisdom(key, {"format": WISDOM_FORMAT, "block": list(blocks[choice.chosen]),
                               "chosen": choice.chosen, "rounds": choice.rounds,
                               "ratios": list(choice.ratios), "threads": threads})
            logger.info("measured %d plans of a copy of %s (%d-byte elements) in %d "
                        "rounds: median time ratios to the model's first %s; runs plan %d",
                        len(plans), list(spec.sizes), elem_bytes, choice.rounds,
                        ", ".join(f"{r:.3f}" for r in choice.ratios), choice.chosen)
        elif choice.how == "budget":
            self.complete = False
            if available > 0:  # a later call with no more budget keeps the model's plan too
                write_wisdom(key, {"format": WISDOM_FORMAT, "block": list(blocks[0]),
                                   "chosen": 0, "rounds": choice.rounds, "threads": threads,
                                   "cut_at": available})
        return plans[choice.chosen]

    def _wisdom(self, key: str, blocks: list[tuple[int, ...]],
                available: float) -> int | None:
        """The candidate the wisdom of `key` chose, or None (none kept; one whose measuring
        was cut short at a budget below `available`; unreadable: warned and removed)."""
        try:
            entry = read_wisdom(key)
            if entry is None:
                return None
            cut_at = entry.get("cut_at")
            if cut_at is not None and float(cut_at) < available:
                return None  # more budget now than the measurement it cut short had
            block = tuple(entry["block"])
            if block not in blocks:
                raise ValueError("its plan is none of the copy's candidates")
            return blocks.index(block)
        except (ValueError, KeyError, TypeError) as e:
            remove_wisdom(key)
            warnings.warn(f"stridec: wisdom entry {key[:16]} is unreadable ({e}); "
                          "measuring the copy's plans again", RuntimeWarning, stacklevel=2)
            return None

    def _measure(self, spec: CopySpec, first: CopyPlan,
                 blocks: list[tuple[int, ...]]) -> Choice:
        """Time the plans of `blocks` (module docstring; `first` the model's, whose
        library they run) within what is left of the budget."""
        n = len(blocks)
        spans = [address_span(spec.sizes, spec.src_strides, spec.src_offset),
                 address_span(spec.sizes, spec.dst_strides, spec.dst_offset)]
        src_bytes, dst_bytes = ((high + 1) * size for (_, high), size
                                in zip(spans, (first.elem_bytes, first.dst_bytes), strict=True))
        if src_bytes + dst_bytes > MAX_SCRATCH_BYTES:
            return Choice(n, 0, "too large")
        if self.seconds >= self.budget:
            return Choice(n, 0, "budget")
        with _disable_current_modes():  # scratch memory even while a fake mode traces
            src = torch.empty(src_bytes, dtype=torch.uint8)
            dst = torch.empty(dst_bytes, dtype=torch.uint8)
            runs = launch.planned_copy_runs(first.elem_bytes, blocks, src, dst,
                                            first.cast)  # builds first
            start = clock()
            deadline = start + self.budget - self.seconds
            try:
                return self._rounds(runs, spec.numel * first.elem_bytes, src, deadline)
            finally:
                self.seconds += clock() - start

    @staticmethod
    def _rounds(runs: list[Callable[[], None]], nbytes: int, src: torch.Tensor,
                deadline: float) -> Choice:
        n = len(runs)
        if clock() + 3 * nbytes / FIRST_CALL_BYTES_PER_SECOND > deadline:
            return Choice(n, 0, "budget")
        src.fill_(0x5A)  # pages of its own, not the shared zero page an unwritten one reads
        begin = clock()
        runs[0]()  # warm: the destination's pages faulted in (every plan writes them all)
        # Each plan's time of one call: the warm call's until it is timed, then the
        # longest seen.
        one = [clock() - begin] * n
        timed = [False] * n
        repeats = max(1, math.ceil(SAMPLE_SECONDS / max(min(one), 1e-9)))
        times: list[list[float]] = []
        for r in range(MAX_ROUNDS):
            sample = [0.0] * n
            for k in ((r + j) % n for j in range(n)):
                if clock() + repeats * one[k] > deadline:
                    return _decide(times, n)
                begin = clock()
                for _ in range(repeats):
                    runs[k]()
                sample[k] = clock() - begin
                one[k] = max(one[k], sample[k] / repeats) if timed[k] else sample[k] / repeats
                timed[k] = True
            times.append(sample)
        return _decide(times, n)


def _decide(times: list[list[float]], n: int) -> Choice:
    """The choice of the rounds `times` (each plan's time in each round): the model's
    first plan unless another's median ratio to it and ratio of medians are both at most
    `1 - MIN_GAIN` and it was faster in `WIN_SHARE` of the rounds; the model's where fewer
    than `MIN_ROUNDS` rounds were timed."""
    if len(times) < MIN_ROUNDS:
        return Choice(n, 0, "budget", len(times))
    ratios = tuple(statistics.median(t[k] / t[0] for t in times) for k in range(n))
    medians = [statistics.median(t[k] for t in times) for k in range(n)]
    best = min(range(n), key=lambda k: ratios[k])
    wins = sum(t[best] < t[0] for t in times)
    if (best and ratios[best] <= 1 - MIN_GAIN and medians[best] <= (1 - MIN_GAIN) * medians[0]
            and wins >= WIN_SHARE * len(times)):
        return Choice(n, best, "measured", len(times), ratios)
    return Choice(n, 0, "measured", len(times), ratios)
