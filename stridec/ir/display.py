"""How IR values draw themselves in a notebook (`_repr_svg_`), without `ir` importing the
drawing code: the package root, which sits above every layer, installs the renderer
(`stridec.viz.svg_or_none`, loaded on first use); without one the text form shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["svg", "set_renderer"]

_renderer: Callable[[Any], str | None] | None = None


def set_renderer(renderer: Callable[[Any], str | None]) -> None:
    """Draw notebook pictures with `renderer(obj) -> SVG text or None`."""
    global _renderer
    _renderer = renderer


def svg(obj: Any) -> str | None:
    """The notebook picture of `obj`, or None (no renderer, or it cannot draw)."""
    return None if _renderer is None else _renderer(obj)
