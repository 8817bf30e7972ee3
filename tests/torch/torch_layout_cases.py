"""Layout graphs shared by the torch-integration tests, each with its torch oracle.

The five graphs the custom-op contract is shown on (a permute copy, an NCHW4 pack with
padded channels, a broadcast materialization, a slice with step, cat), plus the ones the
adjoint needs beyond them (pad, flip, overlapping unfold, expand, select, unpack, split).
Sizes are tiny: gradcheck runs the interpreter once per input element.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import stridec


@dataclass(frozen=True)
class Case:
    name: str
    sizes: tuple[tuple[int, ...], ...]
    build: Callable[..., object]  # stridec Values -> Value or tuple of Values
    torch_fn: Callable[..., object]  # the same on torch tensors (the oracle)

    def graph(self, dtype: str, suffix: str = "") -> stridec.Graph:
        g = stridec.Graph(f"{self.name}_{dtype}{suffix}")
        names = ["x", "y", "z"]
        values = [g.input(names[i], s, dtype) for i, s in enumerate(self.sizes)]
        out = self.build(*values)
        g.output(*(out if isinstance(out, tuple) else (out,)))
        return g

    def inputs(self, dtype: torch.dtype, requires_grad: bool = False,
               seed: int = 0) -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return [torch.randn(s, dtype=dtype, generator=gen).requires_grad_(requires_grad)
                for s in self.sizes]


def _nchw4(x: torch.Tensor) -> torch.Tensor:
    n, c, h, w = x.shape
    padded = F.pad(x, (0, 0, 0, 0, 0, (-c) % 4))
    return padded.reshape(n, -1, 4, h, w).permute(0, 1, 3, 4, 2).contiguous()


FIVE = [
    Case("permute", ((1, 2, 2, 3),),
         lambda x: x.permute(0, 2, 3, 1).contiguous(),
         lambda x: x.permute(0, 2, 3, 1).contiguous()),
    Case("nchw4", ((1, 3, 2, 2),),
         lambda x: x.pack("NCHW4"),
         _nchw4),
    Case("broadcast", ((3, 1),),
         lambda x: x.expand(2, 3, 4).contiguous(),
         lambda x: x.expand(2, 3, 4).contiguous()),
    Case("slice_step", ((4, 7),),
         lambda x: x[1::2, 1:6:2].contiguous(),
         lambda x: x[1::2, 1:6:2].contiguous()),
    Case("cat", ((2, 2), (2, 3)),
         lambda x, y: stridec.cat([x, y], 1),
         lambda x, y: torch.cat([x, y], 1)),
]

MORE = [
    Case("pad", ((2, 3),),
         lambda x: stridec.pad(x, (1, 2, -1, 1)),
         lambda x: F.pad(x, (1, 2, -1, 1))),
    Case("flip", ((2, 3, 2),),
         lambda x: x.flip(0, 2).contiguous(),
         lambda x: x.flip(0, 2)),
    Case("unfold_overlap", ((2, 6),),
         lambda x: x.unfold(1, 3, 1).contiguous(),
         lambda x: x.unfold(1, 3, 1).contiguous()),
    Case("unfold_gaps", ((9,),),
         lambda x: x.unfold(0, 2, 3).contiguous(),
         lambda x: x.unfold(0, 2, 3).contiguous()),
    Case("expand_new_dims", ((1, 3),),
         lambda x: x.expand(2, 2, 3).permute(2, 0, 1).contiguous(),
         lambda x: x.expand(2, 2, 3).permute(2, 0, 1).contiguous()),
    Case("select_and_view", ((3, 4),),
         lambda x: (x.select(1, -1).contiguous(), x.t()),
         lambda x: (x.select(1, -1).contiguous(), x.t())),
    Case("unpack", ((1, 1, 2, 2, 4),),
         lambda x: x.unpack("NCHW4", 3),
         lambda x: x.permute(0, 1, 4, 2, 3).reshape(1, 4, 2, 2)[:, :3].contiguous()),
    Case("split", ((5, 2),),
         lambda x: x.split(2, 0),
         lambda x: tuple(t.contiguous() for t in x.split(2, 0))),
]
