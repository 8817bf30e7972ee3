"""Draw the pictures of docs/gallery.md: the examples of the texts stridec's layout model
comes from (DirectML's strides page, the PyTorch strides article, MegEngine's layouts).

    python docs/gallery.py            # writes docs/gallery/*.png
    python docs/gallery.py OUT_DIR    # elsewhere

Needs the viz extra (matplotlib); the fused chain's plan also needs torch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stridec
from stridec import Layout, get_format

HERE = Path(__file__).resolve().parent


def directml_padding() -> Any:
    # DirectML: a 2 x 3 tensor in a buffer of 10, rows 5 apart: A B C x x D E F x x.
    return stridec.draw(Layout.padded((2, 3), 5), storage_size=10, names=("H", "W"),
                        title="DirectML padding: sizes {2, 3}, strides {5, 1} (pitch 5)")


def directml_nchw() -> Any:
    return stridec.draw(Layout((1, 1, 3, 5), (15, 15, 5, 1)), names="NCHW",
                        title="DirectML packed NCHW: sizes {1, 1, 3, 5}, strides {15, 15, 5, 1}")


def directml_nhwc() -> Any:
    return stridec.draw(Layout((1, 1, 3, 5), (15, 1, 5, 1)), names="NCHW",
                        title="DirectML packed NHWC: sizes {1, 1, 3, 5}, strides {15, 1, 5, 1}")


def nchw_c3() -> Any:
    # One strip of all 18 elements, as MegEngine draws its formats, to compare with NHWC.
    return stridec.draw(Layout.contiguous((1, 3, 2, 3)), names="NCHW", max_columns=18,
                        title="NCHW with C = 3: sizes {1, 3, 2, 3}, strides {18, 6, 3, 1}")


def nhwc_c3() -> Any:
    return stridec.draw(Layout.for_order((1, 3, 2, 3), (0, 2, 3, 1)), names="NCHW",
                        max_columns=18,
                        title="NHWC with C = 3: sizes {1, 3, 2, 3}, strides {18, 1, 9, 3}")


def directml_broadcast() -> Any:
    # DirectML: logically 2 x 3, the second row the first: 3 elements, height-stride 0.
    return stridec.draw(Layout.contiguous((3,)).expand((2, 3)), names=("H", "W"),
                        title="DirectML broadcasting: sizes {2, 3}, strides {0, 1}")


def pytorch_slice() -> Any:
    # The article: t = arange(24).reshape(1, 2, 3, 4); t[:, :, :, 2] has offset 2 and
    # strides (24, 12, 4). Rows of 4 as t's own rows; its storage has 24 elements.
    view = Layout.contiguous((1, 2, 3, 4)).select(3, 2)
    return stridec.draw(view, storage_size=24, max_columns=4, names=("N", "C", "H"),
                        title="PyTorch: arange(24).reshape(1, 2, 3, 4)[:, :, :, 2]")


def nchw4_c3() -> Any:
    return stridec.draw(get_format("NCHW4").packing((2, 3, 2, 3)),
                        title="NCHW4, C = 3 padded to 4: buffer [N, C/4, H, W, 4] = "
                        "[2, 1, 2, 3, 4]")


def chwn4_c3() -> Any:
    return stridec.draw(get_format("CHWN4").packing((2, 3, 2, 3)),
                        title="CHWN4, C = 3 padded to 4: buffer [C/4, H, W, N, 4] = "
                        "[1, 2, 3, 2, 4]")


def fused_chain() -> Any:
    import torch

    g = stridec.Graph("chain")
    x = g.input("x", (2, 3, 4, 5), "float32")
    g.output(x.permute(0, 2, 3, 1).contiguous().to("float16").flip(1).contiguous())
    plan = stridec.compile(g, backend="interpret").plan_for(torch.zeros(2, 3, 4, 5))
    return stridec.draw(plan)


PICTURES: dict[str, Callable[[], Any]] = {
    "directml_padding": directml_padding,
    "directml_nchw": directml_nchw,
    "directml_nhwc": directml_nhwc,
    "nchw_c3": nchw_c3,
    "nhwc_c3": nhwc_c3,
    "directml_broadcast": directml_broadcast,
    "pytorch_slice": pytorch_slice,
    "nchw4_c3": nchw4_c3,
    "chwn4_c3": chwn4_c3,
    "fused_chain": fused_chain,
}


def main(out_dir: str | Path = HERE / "gallery") -> list[Path]:
    """Write every picture as `out_dir/<name>.png`; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, make in PICTURES.items():
        path = out / f"{name}.png"
        # Graph text is set in points on a figure in inches: a little more resolution.
        make().savefig(path, dpi=110 if name == "fused_chain" else 90)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in main(*sys.argv[1:2]):
        print(p)
