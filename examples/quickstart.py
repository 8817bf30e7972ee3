"""stridec in one file: build three layout graphs, compile them, show the IR before and
after the passes and one line per kernel, run them (on the GPU when there is one, else as
native C kernels on the CPU) and check every output against torch.

    python examples/quickstart.py

A kernel's line names its strategy, what it reads and writes, its language and backend,
and the file its source is kept in (named by its cache key); the whole source is
`plan.kernels[i].source`, or `stridec-opt --emit=c graph.ir` for text IR.
docs/codegen.md walks through the lowered `copy` (`space`, `src`, `dst`, `masks`), the
strategies `linear`, `tiled_transpose` and `gather`, and the kernels' source.
"""

from __future__ import annotations

import torch

import stridec


def nchw_to_nhwc() -> tuple[stridec.Graph, list[torch.Tensor], list[torch.Tensor]]:
    g = stridec.Graph("nchw_to_nhwc")
    x = g.input("x", (2, 8, 6, 5), "float16")
    g.output(x.permute(0, 2, 3, 1).contiguous())
    t = torch.randn(2, 8, 6, 5, dtype=torch.float16)
    return g, [t], [t.permute(0, 2, 3, 1).contiguous()]


def nchw_to_nchw4() -> tuple[stridec.Graph, list[torch.Tensor], list[torch.Tensor]]:
    # int8 with C = 3: the fourth channel of every block is padding, filled with 0.
    g = stridec.Graph("nchw_to_nchw4")
    x = g.input("x", (2, 3, 4, 5), "int8")
    g.output(x.pack("NCHW4"))
    t = torch.randint(-128, 128, (2, 3, 4, 5), dtype=torch.int8)
    padded = torch.nn.functional.pad(t, (0, 0, 0, 0, 0, 1))  # C 3 → 4
    expected = padded.reshape(2, 1, 4, 4, 5).permute(0, 1, 3, 4, 2).contiguous()
    return g, [t], [expected]


def slice_and_broadcast() -> tuple[stridec.Graph, list[torch.Tensor], list[torch.Tensor]]:
    g = stridec.Graph("slice_and_broadcast")
    x = g.input("x", (6, 8), "float32")
    b = g.input("bias", (8,), "float32")
    rows = x[1::2].flip(1)  # every other row, columns reversed
    g.output(rows.contiguous(), b.expand(3, 8).contiguous(), x[:, 2:5])
    tx, tb = torch.randn(6, 8), torch.randn(8)
    return g, [tx, tb], [tx[1::2].flip(1), tb.expand(3, 8), tx[:, 2:5]]


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"running on {device}; docs/codegen.md explains the lowered IR and the kernels\n")
    for make in (nchw_to_nhwc, nchw_to_nchw4, slice_and_broadcast):
        graph, inputs, expected = make()
        print(f"=== {graph.name}: IR as built\n{graph}")
        fn = stridec.compile(graph)
        inputs = [t.to(device) for t in inputs]
        plan = fn.plan_for(*inputs)
        print(f"--- after the passes: {plan}")  # the lowered IR, then one line per kernel
        outputs = fn(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        for i, (got, want) in enumerate(zip(outputs, expected, strict=False)):
            assert torch.equal(got.cpu(), want), f"{graph.name}: output {i} differs from torch"
        print(f"{graph.name}: {len(outputs)} output(s) equal torch\n")
    print("all outputs match torch; a kernel's whole source: plan.kernels[i].source")


if __name__ == "__main__":
    main()
