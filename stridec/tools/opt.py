"""`stridec-opt`: read text IR, run a pass pipeline, print the result (like `mlir-opt`).

    stridec-opt graph.ir                                  # the default pipeline
    stridec-opt --pass-pipeline=canonicalize,fold-views - < graph.ir
    stridec-opt --print-ir-after-all graph.ir             # each pass's IR on stderr
    stridec-opt --emit=c graph.ir                         # the C kernels the CPU runs
    stridec-opt --emit=triton graph.ir                    # the Triton kernels of a GPU
    stridec-opt --emit=kernels --target=cuda graph.ir     # the kernels of a target
    stridec-opt --list-passes                             # every pass, one line each
    stridec-opt --emit=dot graph.ir | dot -Tsvg           # Graphviz: kernels as clusters

Targets (`--target`): `cpu`, the `cpu` backend's C kernels (the default, except for
`--emit=triton`); `cuda`, Triton kernels compiled for a GPU; `interpret`, the Triton
kernels Triton's interpreter runs on CPU tensors (`--emit=triton --target=cpu` means
these too).

Input layouts are whatever the text says (`tensor<…, strided<…>>` on an input
specializes it; none means contiguous). As in `mlir-opt`, the result goes to stdout (or
`-o FILE`) and everything else -- IR dumps, timing, errors -- to stderr; bad IR, an unknown
pass or option, or a bad command line prints a message on stderr and exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from stridec.errors import ParseError, StridecError, UnsupportedError

__all__ = ["main"]

EMITS = ("ir", "kernels", "c", "triton", "dot")
TARGETS = ("cpu", "cuda", "interpret")
# The kernel backend of each target (`kernel_language` says what it generates).
_BACKEND = {"cpu": "cpu", "cuda": "triton", "interpret": "interpret"}


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line exits with status 1 (as `mlir-opt` does), not 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def pass_summaries() -> list[tuple[str, str]]:
    """(name, one line) for every registered pass, the default pipeline's first and in its
    order: the first sentence of the pass module's docstring, which starts "`name`: ..."."""
    import importlib

    from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PASS_REGISTRY, _load_passes

    _load_passes()
    default = DEFAULT_PIPELINE.split(",")
    rows = []
    for name in default + sorted(set(PASS_REGISTRY) - set(default)):
        doc = importlib.import_module(PASS_REGISTRY[name].__module__).__doc__ or ""
        text = " ".join(doc.split()).removeprefix(f"`{name}`:").strip()
        sentence = text.split(". ")[0].rstrip(".")
        rows.append((name, sentence[:1].upper() + sentence[1:] + "."))
    return rows


def _pass_list() -> str:
    from stridec.compiler.pass_manager import DEFAULT_PIPELINE

    rows = pass_summaries()
    width = max(len(name) for name, _ in rows)
    lines = [f"  {name:<{width}}  {summary}" for name, summary in rows]
    return (
        "passes (--pass-pipeline=a,b{option=value},...):\n"
        + "\n".join(lines)
        + f"\n\ndefault pipeline:\n  {DEFAULT_PIPELINE}\n"
    )


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="stridec-opt",
        description=__doc__.splitlines()[0],
        epilog=_pass_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", nargs="?", default="-", help="text IR file, or - for stdin")
    p.add_argument(
        "--pass-pipeline",
        default=None,
        help="comma-separated passes (default: the default pipeline)",
    )
    p.add_argument(
        "--print-ir-after-all", action="store_true", help="print the IR after every pass (stderr)"
    )
    p.add_argument(
        "--print-ir-after",
        action="append",
        default=[],
        metavar="PASS",
        help="print the IR after the named pass (stderr; repeatable)",
    )
    p.add_argument(
        "--emit",
        choices=EMITS,
        default="ir",
        help="print the resulting IR; the kernels of --target; the C kernels of the cpu "
        "target; Triton kernels (--target cuda or interpret); or Graphviz DOT of the IR "
        "with the ops of each kernel of --target as a cluster",
    )
    p.add_argument(
        "--target",
        choices=TARGETS,
        default=None,
        help="whose kernels --emit=kernels, --emit=triton and --emit=dot show: cpu (C, "
        "the default), cuda (Triton for a GPU; the default of --emit=triton) or interpret "
        "(Triton for Triton's interpreter on the CPU)",
    )
    p.add_argument("--timing", action="store_true", help="report the time of each pass")
    p.add_argument(
        "--split-input-file",
        action="store_true",
        help="treat '// -----' lines as separators of independent inputs",
    )
    p.add_argument("-o", "--output", default="-", help="where to write the result")
    p.add_argument(
        "--list-passes", action="store_true", help="list the passes, one line each, and exit"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        if args.target is not None and args.emit == "ir":
            parser.error(f"--target={args.target} chooses kernels: it needs --emit=kernels, "
                         "triton or dot")
        try:
            args.lowering = None if args.emit == "ir" else _lowering(args)
        except UnsupportedError as e:
            parser.error(str(e))
    except SystemExit as e:  # --help (0) or a bad command line (1): a status, not a raise
        return e.code if isinstance(e.code, int) else 1
    if args.list_passes:
        sys.stdout.write(_pass_list())
        return 0
    try:
        if args.input == "-":
            text = sys.stdin.read()
        else:
            with open(args.input, encoding="utf-8") as f:
                text = f.read()
    except OSError as e:
        print(f"stridec-opt: cannot read {args.input}: {e.strerror}", file=sys.stderr)
        return 1
    name = "<stdin>" if args.input == "-" else args.input
    chunks = _split(text) if args.split_input_file else [(0, text)]
    results = []
    status = 0
    for first_line, chunk in chunks:
        try:
            results.append(_process(chunk, args))
        except ParseError as e:
            print(f"{name}:{e.line + first_line}:{e.column}: error: {e.reason}", file=sys.stderr)
            status = 1
        except StridecError as e:
            print(f"{name}: error: {e}", file=sys.stderr)
            status = 1
    if status:
        return status
    result = "// -----\n".join(results)
    if args.output == "-":
        sys.stdout.write(result)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(result)
    return 0


def _split(text: str) -> list[tuple[int, str]]:
    """Chunks between `// -----` lines, each with the number of lines before it."""
    chunks: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        if line.strip() == "// -----":
            chunks.append((start, "".join(current)))
            current, start = [], number + 1
        else:
            current.append(line)
    chunks.append((start, "".join(current)))
    return chunks


def _process(text: str, args: argparse.Namespace) -> str:
    from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager
    from stridec.ir.parser import parse

    graph = parse(text)
    if graph.output_op is None:
        # As `stridec.compile` refuses it: the passes would delete every op as dead.
        close = text.rstrip().rfind("}")
        line = text.count("\n", 0, max(close, 0)) + 1
        column = max(close, 0) - (text.rfind("\n", 0, max(close, 0)) + 1) + 1
        raise ParseError(
            f"graph @{graph.name} has no 'output' op; end it with one (output %v, ...), as "
            "stridec.compile requires", line, column)
    pm = PassManager.parse(
        args.pass_pipeline if args.pass_pipeline is not None else DEFAULT_PIPELINE,
        print_ir_after_all=args.print_ir_after_all,
        print_ir_after=tuple(args.print_ir_after),
        stream=sys.stderr,  # the dumps, as mlir-opt's, never mix with the result
    )
    pm.run(graph)
    if args.timing:
        print(pm.timing_report(), file=sys.stderr)
    if args.emit == "ir":
        return str(graph)
    if args.emit == "dot":
        return _dot(graph, args.lowering)
    from stridec.compiler.codegen.lower import lower_to_program

    return _kernels(lower_to_program(graph, args.lowering))


def _lowering(args: argparse.Namespace) -> str:
    """What `lower_to_program` generates for `--emit` and `--target`; a `StridecError`
    for a pair that names two things (C of a GPU, Triton of the cpu backend's)."""
    from stridec.compiler.driver import kernel_language

    target = args.target
    if args.emit == "c":
        if target not in (None, "cpu"):
            raise UnsupportedError(
                f"--emit=c prints the cpu target's C kernels; got --target={target} (its "
                "kernels are Triton: --emit=kernels or --emit=triton)"
            )
        return kernel_language("cpu")
    if args.emit == "triton":
        # `--target=cpu` has long meant the Triton of the CPU: the interpreter's.
        return kernel_language("interpret" if target in ("cpu", "interpret") else "triton")
    return kernel_language(_BACKEND[target or "cpu"])


def _kernels(program) -> str:
    """Each kernel's source under a comment (`#` before Triton, `/* */` around C) naming
    its number, kind, strategy and, for Triton, its grid, canonical dims and arguments."""
    parts = []
    for i, k in enumerate(program.kernels):
        if k.lang == "c":
            parts.append(f"/* kernel {i}: {k.kind} ({k.strategy}), C */\n{k.source}\n")
            continue
        parts.append(
            f"# kernel {i}: {k.kind} ({k.strategy}), grid {list(k.grid)}\n"
            + "".join(f"# {line}\n" for line in k.detail.splitlines())
            + (f"# arguments {k.arguments}\n" if k.params else "")
            + f"{k.source}\n"
        )
    return "".join(parts)


def _dot(graph, lowering: str) -> str:
    """DOT of the graph; its kernels as clusters where it lowers (after a pipeline that
    leaves ops only kernels carry out), else none and a comment saying why."""
    from stridec.compiler.codegen.lower import lower_to_program
    from stridec.viz.dot import graph_to_dot
    from stridec.viz.kernels import kernel_boxes

    try:
        program = lower_to_program(graph, lowering)
    except StridecError as e:
        return graph_to_dot(graph, note=f"no kernels: {e}")
    return graph_to_dot(graph, kernel_boxes(program))


if __name__ == "__main__":
    sys.exit(main())
