"""The checks of `bench/gpu_first_contact.sh` that are not tests or benchmark rows, one
subcommand per phase; each prints a short table and keeps its results in
`DIR/first-contact.json` under its own key, written again after every step (a phase
stopped by its deadline keeps what it finished).

    python bench/first_contact.py env    --out DIR   # versions, the device, the compilers
    python bench/first_contact.py philox --out DIR   # Triton on the GPU == C on the CPU
    python bench/first_contact.py host   --out DIR   # host µs per call against eager

`--dry-run` runs the same steps on the CPU, small: Philox's GPU side is then Triton's
interpreter (only the bits also transposed), the host overhead that of the `cpu` backend
(numbers of no interest: they exercise the code).

- **philox**: `g.philox` (uint32 bits) and `g.philox_uniform` in float32 (also over
  [-2.5, 3.25)), float16 and bfloat16, each at 4,194,305 elements (2^22 + 1: a partial
  last block) flat and written transposed (a (2049, 2047) draw's `.t().contiguous()`),
  from a counter that carries into its second word: the values and the new state of the
  compiled Triton kernels on the GPU against the C kernels on the CPU, bit for bit.
- **host**: a 16 x 16 float32 `x.t().contiguous()` (bench/run.py's host row): eager
  (`x.t().contiguous()`, and `o.copy_(x.t())` into a preallocated `o`), `fn(x)`,
  `fn(x, out=o)`, the torch op `op(x)` and `op(x, out=o)`: µs of host time per call (a
  loop of back-to-back calls between two clock reads; the GPU runs behind), the median of
  interleaved rounds, the order rotated each round, then each system's ratio to eager.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import stridec  # noqa: E402
from stridec.runtime.backends.reference_philox import make_state  # noqa: E402

RESULTS = "first-contact.json"


def keep(out: Path, key: str, value: Any) -> None:
    """Merge `value` into `out/first-contact.json` under `key` (the file written whole)."""
    path = out / RESULTS
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = value
    part = path.with_suffix(".json.part")
    part.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(part, path)


def _first_line(command: list[str]) -> str:
    if shutil.which(command[0]) is None:
        return "not found"
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"failed: {e}"
    text = (run.stdout or run.stderr).strip().splitlines()
    return (text[-1] if command[0] == "nvcc" and text else text[0] if text else "") or "?"


def env(out: Path, dry_run: bool) -> int:
    import numpy

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError as e:
        info["triton"] = f"not importable: {e}"
    for name in ("pytest", "xdist", "hypothesis", "matplotlib", "filecheck", "pydot"):
        try:
            module = __import__(name)
            info[name] = getattr(module, "__version__", "present")
        except ImportError:
            info[name] = "missing"
    for tool, command in (("nvcc", ["nvcc", "--version"]), ("gcc", ["gcc", "--version"]),
                          ("cc", ["cc", "--version"])):
        info[tool] = _first_line(command)
    info["cuda_available"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update({
            "devices": torch.cuda.device_count(),
            "device": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1),
            "multiprocessors": props.multi_processor_count,
        })
    elif not dry_run:
        print("env: torch sees no CUDA device", file=sys.stderr)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    info["stridec_commit"] = commit or "unknown (no git)"
    keep(out, "env", info)
    for k, v in info.items():
        print(f"{k:>16}: {v}")
    return 0 if torch.cuda.is_available() or dry_run else 1


# -- Philox --------------------------------------------------------------------------------
def _philox_graph(kind: str, dtype: str, sizes: tuple[int, ...], transposed: bool,
                  low: float, high: float) -> stridec.Graph:
    g = stridec.Graph(f"philox_{kind}_{dtype}_{'t' if transposed else 'flat'}")
    s = g.input("state", (6,), "uint32")
    if kind == "bits":
        values, state = g.philox(s, sizes)
    else:
        values, state = g.philox_uniform(s, sizes, dtype, low, high)
    g.output(values.t().contiguous() if transposed else values, state)
    return g


def _bits(t: torch.Tensor) -> torch.Tensor:
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(width)


def philox(out: Path, dry_run: bool) -> int:
    cuda = torch.cuda.is_available() and not dry_run
    if not cuda and not dry_run:
        print("philox: no CUDA device: nothing to compare", file=sys.stderr)
        keep(out, "philox", {"error": "no CUDA device"})
        return 1
    n, shape = (4099, (67, 61)) if dry_run else (2**22 + 1, (2049, 2047))
    device, backend = ("cuda", "auto") if cuda else ("cpu", "interpret")
    state = torch.from_numpy(make_state(2**32 - 3, 0x9E3779B97F4A7C15).astype("uint32"))
    cases = [("bits", "uint32", 0.0, 1.0), ("uniform", "float32", 0.0, 1.0),
             ("uniform", "float32", -2.5, 3.25), ("uniform", "float16", 0.0, 1.0),
             ("uniform", "bfloat16", 0.0, 1.0)]
    from stridec.runtime.backends import cpu as cpu_backend

    # The C kernels where this machine can build them, else the reference executor (which
    # reproduces Random123's vectors too).
    native = cpu_backend.available()
    rows, failed = [], 0
    print(f"philox: {'Triton on ' + device if cuda else 'the interpreter (dry run)'} "
          f"against {'the C kernels' if native else 'the reference executor (no C compiler)'}"
          f" on the CPU, {n:,} elements flat and {shape} transposed")
    for kind, dtype, low, high in cases:
        # A dry run places only the bits transposed (each layout builds a C unit here).
        for transposed in (False, True) if not dry_run or kind == "bits" else (False,):
            sizes = shape if transposed else (n,)
            g = _philox_graph(kind, dtype, sizes, transposed, low, high)
            row: dict[str, Any] = {"kind": kind, "dtype": dtype, "low": low, "high": high,
                                   "sizes": list(sizes), "transposed": transposed,
                                   "against": "cpu" if native else "reference"}
            began = time.perf_counter()
            try:
                got, got_state = stridec.compile(g, backend=backend)(state.to(device))
                want, want_state = (stridec.compile(g, backend="cpu")(state) if native
                                    else stridec.run_reference(g, state))
                diff = (_bits(got.cpu()) != _bits(want)).reshape(-1)
                bad = int(diff.sum())
                row.update(mismatches=bad, state_equal=torch.equal(got_state.cpu(), want_state),
                           first_mismatch=int(diff.nonzero()[0]) if bad else None,
                           elements=got.numel())
                row["ok"] = bad == 0 and row["state_equal"]
            except Exception as e:  # noqa: BLE001 - reported, and the next case runs
                row.update(ok=False, error=f"{type(e).__name__}: {e}")
            row["seconds"] = round(time.perf_counter() - began, 2)
            failed += not row["ok"]
            rows.append(row)
            keep(out, "philox", rows)
            what = f"{kind} {dtype}" + (f" [{low}, {high})" if low or high != 1.0 else "")
            print(f"  {what:<28} {'transposed' if transposed else 'flat':<10} "
                  f"{'ok' if row['ok'] else 'MISMATCH ' + str(row.get('error') or row)}"
                  f"  ({row['seconds']} s)")
    return 1 if failed else 0


# -- host overhead -------------------------------------------------------------------------
def _per_call_us(call: Callable[[], Any], calls: int) -> float:
    gc.collect()
    gc.disable()
    try:
        began = time.perf_counter()
        for _ in range(calls):
            call()
        return (time.perf_counter() - began) / calls * 1e6
    finally:
        gc.enable()


def host(out: Path, dry_run: bool) -> int:
    cuda = torch.cuda.is_available() and not dry_run
    if not cuda and not dry_run:
        print("host: no CUDA device", file=sys.stderr)
        keep(out, "host", {"error": "no CUDA device"})
        return 1
    device = "cuda" if cuda else "cpu"
    calls, rounds = (50, 2) if dry_run else (2000, 9)
    g = stridec.Graph("first_contact_host")
    g.output(g.input("x", (16, 16), "float32").t().contiguous())
    fn = stridec.compile(g)
    op = fn.as_torch_op("stridec_first_contact::transpose16")
    x = torch.randn(16, 16, device=device)
    o = torch.empty(16, 16, device=device)
    systems: dict[str, Callable[[], Any]] = {
        "eager x.t().contiguous()": lambda: x.t().contiguous(),
        "eager o.copy_(x.t())": lambda: o.copy_(x.t()),
        "fn(x)": lambda: fn(x),
        "fn(x, out=o)": lambda: fn(x, out=o),
        "op(x)": lambda: op(x),
        "op(x, out=o)": lambda: op(x, out=o),
    }
    want = x.t().contiguous()
    for name, call in systems.items():  # compile, warm up, check once
        result = call()
        if name != "eager o.copy_(x.t())":
            got = o if result is None or "out=o" in name else result
            assert torch.equal(got, want), f"host: {name} differs from eager"
        for _ in range(20):
            call()
    if cuda:
        torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in systems}
    names = list(systems)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(_per_call_us(systems[name], calls))
            if cuda:
                torch.cuda.synchronize()
    eager = statistics.median(times["eager x.t().contiguous()"])
    eager_out = statistics.median(times["eager o.copy_(x.t())"])
    result = {"device": device, "calls": calls, "rounds": rounds, "us": {}}
    print(f"host: µs per call on {device}, median of {rounds} rounds of {calls} calls "
          f"(host time; the GPU runs behind)")
    for name in names:
        us = statistics.median(times[name])
        base = eager_out if "out=o" in name or "copy_" in name else eager
        result["us"][name] = {"median": round(us, 2), "min": round(min(times[name]), 2),
                              "max": round(max(times[name]), 2),
                              "vs_eager": round(us / base, 2)}
        print(f"  {name:<26} {us:8.2f}  ({min(times[name]):.2f}-{max(times[name]):.2f})"
              f"  {us / base:5.2f}x eager{' into o' if base is eager_out else ''}")
    keep(out, "host", result)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("phase", choices=("env", "philox", "host"))
    p.add_argument("--out", type=Path, required=True, help="folder of first-contact.json")
    p.add_argument("--dry-run", action="store_true", help="on the CPU, small")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return {"env": env, "philox": philox, "host": host}[args.phase](args.out, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
