"""stridec: a compiler for tensor layout programs.

Build a graph of views, materializations and Philox random generation, let the compiler
fold what is free into stride rewrites, and run the rest as kernels: native C on the CPU
(the `cpu` backend), Triton on a GPU.

The IR names load with the package; the names that run graphs (and so need torch) —
`compile`, `CompiledGraph`, `Plan`, `run_reference`, `trace` — load on first use
(PEP 562), so parsing, optimizing and printing IR never imports torch; so does `draw`
(matplotlib).
"""

from __future__ import annotations

import importlib
from typing import Any

from stridec import errors
from stridec.errors import (
    BuildError,
    CallError,
    InternalError,
    LayoutError,
    ParseError,
    ShapeError,
    StridecError,
    UnsupportedError,
    VerificationError,
)
from stridec.ir import display as _display
from stridec.ir.builder import cat, pad
from stridec.ir.dtypes import DTYPES, DType, as_dtype
from stridec.ir.formats import FORMATS, Format, MaskBound, Packing, PitchedRows, get_format
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout
from stridec.ir.parser import parse
from stridec.ir.types import TensorType
from stridec.version import __version__


def _svg_or_none(obj: Any) -> str | None:
    # Notebook pictures of graphs and layouts: the drawing code loads on first use.
    from stridec.viz import svg_or_none

    return svg_or_none(obj)


_display.set_renderer(_svg_or_none)


def _logging_from_environment() -> None:
    # The `stridec` logger: compiles and C builds at INFO with their time, cache hits at
    # DEBUG. Silent unless the application configures logging, or `STRIDEC_LOG=info`
    # (or `debug`) asks for its lines on stderr.
    import logging
    import os

    logger = logging.getLogger("stridec")
    logger.addHandler(logging.NullHandler())
    level = os.environ.get("STRIDEC_LOG", "").strip().upper()
    if level in ("DEBUG", "INFO", "WARNING", "ERROR"):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(level)


_logging_from_environment()

# name → module defining it, imported on first access.
_LAZY = {
    "CompiledGraph": "stridec.runtime.compile",
    "Plan": "stridec.runtime.plan",
    "compile": "stridec.runtime.compile",
    "run_reference": "stridec.runtime.backends.reference",
    "trace": "stridec.torch.trace",
    # `draw` pulls in matplotlib only when it runs.
    "draw": "stridec.viz",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stridec' has no attribute {name!r}")
    if name != "draw":
        # The torch layer installs `CompiledGraph.as_torch_op`'s operator factory on import.
        importlib.import_module("stridec.torch")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # The public API only: not the helpers this module imports (`importlib`, `Any`, ...).
    return sorted(__all__)


__all__ = [
    "CallError",
    "CompiledGraph",
    "InternalError",
    "Plan",
    "compile",
    "DTYPES",
    "DType",
    "FORMATS",
    "Format",
    "Graph",
    "Layout",
    "LayoutError",
    "MaskBound",
    "Op",
    "Packing",
    "ParseError",
    "PitchedRows",
    "ShapeError",
    "StridecError",
    "TensorType",
    "UnsupportedError",
    "BuildError",
    "Value",
    "VerificationError",
    "__version__",
    "as_dtype",
    "cat",
    "draw",
    "errors",
    "get_format",
    "pad",
    "parse",
    "run_reference",
    "trace",
]
