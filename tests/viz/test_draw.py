"""`stridec.draw`: the files are valid PNG / SVG, the figure shows the grid's labels, and
without matplotlib the error names the extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from picture_files import assert_svg, png_size

import stridec
from stridec.errors import UnsupportedError
from stridec.ir.formats import CHWN4, NCHW4, get_format
from stridec.ir.layout import Layout
from stridec.viz.grid import storage_grid
from stridec.viz.storage import _label

LAYOUTS = [
    Layout.padded((2, 3), 5),
    Layout.contiguous((3,)).expand((2, 3)),
    Layout.contiguous((7,)).unfold(0, 3, 2),
    Layout.contiguous((2, 3, 4)).flip((0, 2)),
    Layout.contiguous((1, 2, 3, 4)).select(3, 2),
    Layout((), (), 3),
    Layout.contiguous((0, 3)),
    Layout.contiguous((8, 64, 56, 56)).permute((0, 2, 3, 1)),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_layout_pictures_are_png_and_svg(tmp_path: Path, layout: Layout) -> None:
    pytest.importorskip("matplotlib")
    fig = stridec.draw(layout, tmp_path / "a.png")
    width, height = png_size(tmp_path / "a.png")
    assert 300 < width < 3000 and 150 < height < 3000
    stridec.draw(layout, tmp_path / "a.svg")
    assert_svg(tmp_path / "a.svg")
    # Every storage cell the grid holds is labelled in the figure.
    shown = {t.get_text() for t in fig.axes[0].texts}
    for cell in storage_grid(layout).cells.values():
        if cell.reads:
            assert _label(cell.reads) in shown


@pytest.mark.parametrize("fmt", [NCHW4, CHWN4, get_format("pitched<16>")], ids=str)
def test_format_pictures(tmp_path: Path, fmt) -> None:
    pytest.importorskip("matplotlib")
    fig = stridec.draw(fmt.packing((2, 3, 2, 3), "float32"), tmp_path / "f.png")
    png_size(tmp_path / "f.png")
    assert "fill" in {t.get_text() for t in fig.axes[0].texts}


def test_value_picture_and_repr_svg() -> None:
    pytest.importorskip("matplotlib")
    g = stridec.Graph("g")
    x = g.input("x", (2, 3, 4), "float32")
    y = x.permute(2, 0, 1)
    fig = stridec.draw(y)
    assert "over the storage of input 'x'" in fig.axes[0].texts[-1].get_text()
    assert_svg(Layout.padded((2, 3), 5)._repr_svg_())


def test_bad_arguments_name_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match=r"must end in \.png or \.svg; got suffix '\.jpg'"):
        stridec.draw(Layout.contiguous((2,)), tmp_path / "a.jpg")
    pytest.importorskip("matplotlib")
    with pytest.raises(UnsupportedError, match="expected a Layout, .* got int"):
        stridec.draw(3)


def test_without_matplotlib_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(UnsupportedError, match=r'draw: .*matplotlib.*pip install "stridec\[viz\]"'):
        stridec.draw(Layout.contiguous((2, 3)))
    assert Layout.contiguous((2, 3))._repr_svg_() is None


def test_import_stridec_does_not_import_matplotlib() -> None:
    code = (
        "import sys, stridec; stridec.draw; stridec.Layout.contiguous((2,)).table();"
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"
