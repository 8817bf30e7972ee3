"""Pictures of layouts, graphs and plans (matplotlib, the optional ``viz`` extra).

    stridec.draw(Layout.padded((2, 3), 5), "padding.png")   # storage strip + logical tensor
    stridec.draw(graph, "graph.svg")                        # ops and values with their layouts
    stridec.draw(fn.plan_for(x))                            # the ops of each kernel, boxed

`storage_grid` (the content of a storage picture) and `graph_to_dot` need no matplotlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stridec.errors import UnsupportedError
from stridec.ir.ops import InputOp
from stridec.viz.grid import StorageGrid, layout_map, packing_map, storage_grid

__all__ = ["draw", "storage_grid", "StorageGrid", "svg_or_none", "require_matplotlib"]

EXTRA_HINT = 'pip install "stridec[viz]"'


def require_matplotlib(what: str) -> None:
    """Raise `UnsupportedError` naming the extra when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UnsupportedError(
            f"{what}: drawing needs matplotlib, which is not installed; install the "
            f"viz extra: {EXTRA_HINT}"
        ) from None


def draw(obj: Any, path: str | Path | None = None, **options: Any) -> Any:
    """Draw a `Layout`, a format (a `Format` such as `get_format("NCHW4")`, `pitched<N>`, or
    its `Packing`), a `Value`, a `Graph` or a `Plan`; return the matplotlib figure, saved
    to `path` (PNG or SVG by its suffix) when given.

    Options for layouts and formats: `storage_size` (draw storage past the last
    addressed element), `color_dim` (the logical dim that colours the cells; None for one
    colour), `max_columns`, `max_rows` (of the storage strip), `title`, `names` (dim
    letters); for a format, `sizes` (the logical NCHW sizes packed; by default one and a
    half blocks of channels, so the padding shows) and `dtype` (of pitched rows).
    Options for graphs and plans: `title`, and `engine`: "dot" (Graphviz, which must be
    installed), "layers" (stridec's own layered layout) or "auto" (dot where installed).

    >>> fig = stridec.draw(stridec.Layout.padded((2, 3), 5))   # rows of 5 holding 3
    >>> type(fig).__name__
    'Figure'
    >>> fig = stridec.draw(stridec.get_format("NCHW4"))        # C = 6: two blocks of 4
    """
    from stridec.ir.formats import Format, Packing, PitchedRows
    from stridec.ir.graph import Graph, Value
    from stridec.ir.layout import Layout

    if path is not None:
        suffix = Path(path).suffix.lower()
        if suffix not in (".png", ".svg"):
            raise UnsupportedError(
                f"draw: path {str(path)!r} must end in .png or .svg; got suffix {suffix!r}"
            )
    require_matplotlib("draw")
    if isinstance(obj, (Format, PitchedRows)):
        obj, options = _format_packing(obj, options)
    if isinstance(obj, (Layout, Packing)):
        fig = _draw_storage(obj, **options)
    elif isinstance(obj, Value):
        fig = _draw_value(obj, **options)
    elif isinstance(obj, Graph):
        from stridec.viz.graphs import draw_graph

        fig = draw_graph(obj, **options)
    elif _is_plan(obj):
        from stridec.viz.graphs import draw_plan

        fig = draw_plan(obj, **options)
    else:
        raise UnsupportedError(
            "draw: expected a Layout, a Format, a Packing, a Value, a Graph or a Plan; got "
            f"{type(obj).__name__}"
        )
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _format_packing(fmt: Any, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The `Packing` a format picture draws: of `sizes` (default: N = 1, or 2 for a
    format that interleaves N; one and a half blocks of channels; H = 2, W = 3), titled
    with the format's name."""
    from stridec.ir.formats import Format

    options = dict(options)
    dtype = options.pop("dtype", "float32")
    sizes = options.pop("sizes", None)
    if sizes is None:
        if isinstance(fmt, Format):
            block = fmt.block if fmt.is_blocked else 2
            n = 2 if fmt.is_blocked and fmt.order.index(0) > fmt.order.index(1) else 1
            sizes = (n, block + max(block // 2, 1), 2, 3)
        else:  # pitched rows
            sizes = (2, 3)
    options.setdefault("title", f"{fmt} of logical sizes {tuple(sizes)}")
    return fmt.packing(sizes, dtype), options


def _is_plan(obj: Any) -> bool:
    # The runtime (and torch) is imported only when a plan could be what was passed.
    return type(obj).__name__ == "Plan" and hasattr(obj, "program") and hasattr(obj, "ir")


def _draw_storage(obj: Any, *, storage_size: int | None = None, color_dim: Any = -1,
                  max_columns: int = 16, max_rows: int = 8, title: str | None = None,
                  names: Any = None) -> Any:
    from stridec.ir.layout import Layout
    from stridec.viz.storage import draw_storage

    if isinstance(obj, Layout):
        m = layout_map(obj, storage_size, color_dim)
    else:
        m = packing_map(obj)
    grid = storage_grid(m, max_columns=max_columns, max_rows=max_rows)
    return draw_storage(grid, title=title, names=names)


def _draw_value(value: Any, **options: Any) -> Any:
    """A value's layout over its root storage, titled with the value's type."""
    options.setdefault("title", f"{value.type}  (over the storage of {_root_name(value)})")
    return _draw_storage(value.type.layout, **options)


def _root_name(value: Any) -> str:
    root = value.root()
    if isinstance(root.owner, InputOp):
        return f"input {root.owner.arg_name!r}"
    return f"the result of '{root.owner.name}'"


def svg_or_none(obj: Any) -> str | None:
    """SVG text of `draw(obj)` for notebooks (`_repr_svg_`); None without matplotlib or
    when the object cannot be drawn, so a notebook falls back to the text form."""
    try:
        import io

        require_matplotlib("_repr_svg_")
        fig = draw(obj)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg")
        return buffer.getvalue()
    except Exception:
        return None
