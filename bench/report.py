"""Writing a benchmark run: the JSON file, the markdown table and the PNG bar chart.

All three are built from the run's report dict (see `bench/run.py`): `rows` of kind
"bandwidth" (one per workload), "host_overhead" and "compile_time". A value that was not
measured (smoke mode, a failed system) is `None` in JSON and "—" in the table.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["markdown", "write_chart", "write_report", "result_stem"]

SYSTEMS = ("stridec", "eager", "compile")
LABELS = {"stridec": "stridec", "eager": "torch eager", "compile": "torch.compile"}
DASH = "—"


def result_stem(report: dict[str, Any], folder: Path) -> Path:
    """`<folder>/<date>-<device>` (e.g. `2026-11-21-nvidia-h200`), with `-2`, `-3` … added
    when a run of the same day and device is already there."""
    device = re.sub(r"[^a-z0-9]+", "-", report["device"]["name"].lower()).strip("-") or "device"
    if report["mode"] == "smoke":
        device += "-smoke"
    base = f"{report['date'][:10]}-{device}"
    stem, k = folder / base, 1
    while any(stem.with_suffix(ext).exists() for ext in (".json", ".md", ".png")):
        k += 1
        stem = folder / f"{base}-{k}"
    return stem


def _num(value: float | None, fmt: str) -> str:
    return DASH if value is None else format(value, fmt)


def _gbps(value: float | None) -> str:
    """Whole GB/s on a GPU; three significant digits for the CPU's small numbers."""
    return _num(value, ",.0f" if value is None or value >= 100 else ".3g")


def _system(row: dict[str, Any], name: str) -> dict[str, Any]:
    return (row.get("systems") or {}).get(name) or {}


def _bandwidth_table(rows: list[dict[str, Any]]) -> list[str]:
    head = ["workload", "shape", "dtype", "MB moved", "kernels", "copy GB/s"]
    for s in SYSTEMS:
        head += [f"{LABELS[s]} GB/s", "% copy"]
    head += ["× eager", "× compile"]
    streamed = any(r.get("stream") for r in rows)
    if streamed:
        head += ["stream GB/s", "write GB/s", "bound × eager"]
    head += ["check"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            f"`{r['name']}`",
            r.get("shape_text", "x".join(map(str, r["shape"]))).replace("x", "×"),
            r["dtype"],
            _num(r["bytes_total"] / 1e6 if r.get("bytes_total") else None, ",.4g"),
            _num(r.get("kernels"), "d"), _gbps((r.get("copy") or {}).get("gbps")),
        ]
        for s in SYSTEMS:
            m = _system(r, s)
            cells += [_gbps(m.get("gbps")), _num(m.get("pct_copy"), ".1f")]
        cells += [_num(r.get("vs_eager"), ".2f"), _num(r.get("vs_compile"), ".2f")]
        if streamed:
            cells += [_gbps((r.get("stream") or {}).get("gbps")),
                      _gbps((r.get("stream_fill") or {}).get("gbps")),
                      _num(r.get("bound_vs_eager"), ".2f")]
        cells += ["ok" if r["status"] == "ok" else f"**{r['status']}**"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _host_table(row: dict[str, Any]) -> list[str]:
    lines = ["| system | µs per cached call | kernels |", "|---|---|---|"]
    for s in SYSTEMS:
        m = _system(row, s)
        kernels = _num(row.get("kernels"), "d") if s == "stridec" else DASH
        lines.append(f"| {LABELS[s]} | {_num(m.get('us_per_call'), '.1f')} | {kernels} |")
    for s, label in (("stridec_out", "stridec, `out=` preallocated"),
                     ("eager_out", "torch eager, `out.copy_(view)`")):
        m = _system(row, s)
        if m:
            lines.append(f"| {label} | {_num(m.get('us_per_call'), '.1f')} | {DASH} |")
    return lines


def _compile_table(row: dict[str, Any]) -> list[str]:
    lines = [
        "| process | plan ms (passes + codegen, or disk) | kernel load ms (of first call) "
        "| first call ms (+ Triton or C build, launch) | total ms | compiles | disk hits "
        "| imports ms (apart) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in ("cold", "warm"):
        m = row.get(run) or {}
        lines.append(
            f"| {run} | {_num(m.get('plan_ms'), '.1f')} | {_num(m.get('load_ms'), '.1f')} "
            f"| {_num(m.get('first_call_ms'), '.1f')} "
            f"| {_num(m.get('total_ms'), '.1f')} | {_num(m.get('compiles'), 'd')} "
            f"| {_num(m.get('disk_hits'), 'd')} | {_num(m.get('imports_ms'), '.0f')} |"
        )
    return lines


def _geomean(values: list[float]) -> float | None:
    import math

    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _cpu_targets(rows: list[dict[str, Any]]) -> list[str]:
    """The CPU targets: every row >= 1.5x eager and >= 1.0x torch.compile, geomean >= 2x
    eager; the rows that miss one."""
    eager = [r["vs_eager"] for r in rows if r.get("vs_eager")]
    compiled = [r["vs_compile"] for r in rows if r.get("vs_compile")]
    lines = [
        f"Geomean over {len(eager)} rows: {_num(_geomean(eager), '.2f')}× torch eager "
        f"(target ≥ 2), {_num(_geomean(compiled), '.2f')}× torch.compile "
        f"({len(compiled)} rows).",
    ]
    slow = [f"`{r['name']}` ({r['vs_eager']:.2f}× eager)" for r in rows
            if r.get("vs_eager") and r["vs_eager"] < 1.5]
    slow += [f"`{r['name']}` ({r['vs_compile']:.2f}× torch.compile)" for r in rows
             if r.get("vs_compile") and r["vs_compile"] < 1.0]
    lines.append("Rows below 1.5× eager or 1.0× torch.compile: "
                 + (", ".join(slow) if slow else "none") + ".")
    bounded = [f"`{r['name']}` ({r['bound_vs_eager']:.2f}×)" for r in rows
               if r.get("vs_eager") and r["vs_eager"] < 1.5
               and r.get("bound_vs_eager") and r["bound_vs_eager"] < 1.5]
    if bounded:
        lines.append("Of these, rows where even the streaming copy of the row's bytes (or "
                     "the streaming write of its output) is under 1.5× eager "
                     "(bound × eager): " + ", ".join(bounded) + ".")
    return lines


def markdown(report: dict[str, Any]) -> str:
    """The run as a markdown page: environment, then one table per kind of row."""
    dev, ver, st = report["device"], report["versions"], report["settings"]
    lines = [
        f"# stridec benchmarks — {dev['name']} — {report['date']}",
        "",
        f"- device: {dev['name']} ({dev['isa']}; {dev.get('threads')} threads)" if "isa" in dev
        else f"- device: {dev['name']} (capability {dev.get('capability') or DASH}, driver "
        f"{dev.get('driver') or DASH}, CUDA {dev.get('cuda') or DASH}, "
        f"{_num(dev.get('memory_gib'), '.0f')} GiB)",
        f"- versions: stridec {ver['stridec']} ({ver.get('stridec_commit') or 'no git'}), "
        f"torch {ver['torch']}, triton {ver['triton']}, Python {ver['python']}",
        f"- mode: {report['mode']} (scale {report['scale']}, backend {report['backend']}); "
        f"timing: {st['timer']}",
        "- GB/s = (bytes read + bytes written) / median time; % copy = GB/s over the GB/s of "
        "a `dst.copy_(src)` of the same byte count in this run; × eager and × compile = "
        "their median time over stridec's (above 1: stridec is faster)."
        + (" stream GB/s: the same copy with streaming (non-temporal) stores, one "
           "contiguous part a thread, the fastest plain copy here; bound × eager = eager's "
           "time over it, the most a kernel that reads and writes the row's bytes could "
           "gain on eager; for a row that writes more than it reads, eager's time over the "
           "slower of it and a streaming write of the row's output bytes (write GB/s)."
           if report["mode"] == "cpu" else ""),
        "",
        "## Bandwidth",
        "",
    ]
    rows = [r for r in report["rows"] if r["kind"] == "bandwidth"]
    lines += _bandwidth_table(rows)
    if report["mode"] == "cpu":
        lines += [""] + _cpu_targets(rows)
    for r in report["rows"]:
        if r["kind"] == "host_overhead":
            lines += ["", f"## Host overhead of a cached call (`{r['name']}`)", ""]
            lines += _host_table(r)
        elif r["kind"] == "compile_time":
            lines += ["", f"## Compile time in fresh processes (`{r['workload']}`)", ""]
            lines += _compile_table(r)
    notes = [(r["name"], r["note"]) for r in report["rows"] if r.get("note")]
    problems = [(r["name"], r["error"]) for r in report["rows"] if r.get("error")]
    problems += [
        (r["name"], f"{LABELS[s]}: {m['error']}")
        for r in report["rows"] for s in SYSTEMS if (m := _system(r, s)).get("error")
    ]
    if notes:
        lines += ["", "## Notes", ""] + [f"- `{n}`: {t}" for n, t in notes]
    if problems:
        lines += ["", "## Failures", ""] + [f"- `{n}`: {t}" for n, t in problems]
    return "\n".join(lines) + "\n"


def write_chart(report: dict[str, Any], path: Path) -> str | None:
    """A horizontal bar chart of % of copy bandwidth per workload for the three systems;
    returns why it was skipped (no matplotlib, nothing timed), or None when written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no chart"
    rows = [r for r in report["rows"] if r["kind"] == "bandwidth"
            and _system(r, "stridec").get("pct_copy") is not None]
    if not rows:
        return "no timed bandwidth rows: no chart"
    height = 0.27
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(rows) + 1.6))
    for k, s in enumerate(SYSTEMS):
        values = [_system(r, s).get("pct_copy") or 0.0 for r in rows]
        ax.barh([i + (k - 1) * height for i in range(len(rows))], values, height,
                label=LABELS[s])
    ax.axvline(100, color="black", linewidth=0.8)
    target = 50 if report["mode"] == "cpu" else 90
    ax.axvline(target, color="gray", linestyle="--", linewidth=0.8, label=f"{target} % target")
    ax.set_yticks(range(len(rows)), [r["name"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("% of same-run copy bandwidth (same bytes; on the CPU a memcpy)")
    ax.set_title(f"stridec — {report['device']['name']} — {report['date'][:10]}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def write_json(report: dict[str, Any], stem: Path) -> Path:
    """Write `<stem>.json` whole: a new file renamed over the old one, so a reader, or a
    run killed while writing, never leaves half a file."""
    path = stem.with_suffix(".json")
    part = stem.with_suffix(".json.part")
    part.write_text(json.dumps(report, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(part, path)
    return path


def write_report(report: dict[str, Any], folder: Path,
                 stem: Path | None = None) -> tuple[list[Path], str | None]:
    """Write `<stem>.json`, `<stem>.md` and (with matplotlib) `<stem>.png` into `folder`
    (`stem`: the one the run's JSON already has, else a free one, `result_stem`); return
    the paths written and why the chart was skipped (or None)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = stem or result_stem(report, folder)
    json_path, md_path, png_path = (stem.with_suffix(e) for e in (".json", ".md", ".png"))
    write_json(report, stem)
    md_path.write_text(markdown(report), encoding="utf-8")
    skipped = write_chart(report, png_path)
    written = [json_path, md_path] + ([] if skipped else [png_path])
    return written, skipped
