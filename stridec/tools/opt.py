"""`stridec-opt`: read text IR, run a pass pipeline, print the result (like `mlir-opt`).

    stridec-opt graph.ir                                  # the default pipeline
    stridec-opt --pass-pipeline=canonicalize,fold-views - < graph.ir
    stridec-opt --print-ir-after-all graph.ir
    stridec-opt --emit=triton graph.ir                    # the generated kernels

Input layouts are whatever the text says (`tensor<…, strided<…>>` on an input
specializes it; none means contiguous). Bad IR or an unknown pass: a message on stderr
and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from stridec.errors import ParseError, StridecError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stridec-opt", description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="?", default="-", help="text IR file, or - for stdin")
    p.add_argument(
        "--pass-pipeline",
        default=None,
        help="comma-separated passes (default: the default pipeline)",
    )
    p.add_argument(
        "--print-ir-after-all", action="store_true", help="print the IR after every pass"
    )
    p.add_argument(
        "--print-ir-after",
        action="append",
        default=[],
        metavar="PASS",
        help="print the IR after the named pass (repeatable)",
    )
    p.add_argument(
        "--emit",
        choices=("ir", "triton"),
        default="ir",
        help="print the resulting IR, or the generated Triton kernels",
    )
    p.add_argument(
        "--target", choices=("cuda", "cpu"), default="cuda", help="kernel target for --emit=triton"
    )
    p.add_argument("--timing", action="store_true", help="report the time of each pass")
    p.add_argument(
        "--split-input-file",
        action="store_true",
        help="treat '// -----' lines as separators of independent inputs",
    )
    p.add_argument("-o", "--output", default="-", help="where to write the result")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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
    pm = PassManager.parse(
        args.pass_pipeline if args.pass_pipeline is not None else DEFAULT_PIPELINE,
        print_ir_after_all=args.print_ir_after_all,
        print_ir_after=tuple(args.print_ir_after),
        stream=sys.stdout,
    )
    pm.run(graph)
    if args.timing:
        print(pm.timing_report(), file=sys.stderr)
    if args.emit == "triton":
        from stridec.compiler.codegen.lower import lower_to_program

        program = lower_to_program(graph, args.target)
        return "".join(
            f"# kernel {i}: {k.kind} ({k.strategy}), grid {list(k.grid)}\n{k.source}\n"
            for i, k in enumerate(program.kernels)
        )
    return str(graph)


if __name__ == "__main__":
    sys.exit(main())
