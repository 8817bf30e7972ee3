"""stridec: a compiler for tensor layout programs.

Build a graph of views, materializations and Philox random generation, let the compiler
fold what is free into stride rewrites, and run the rest as Triton kernels.
"""

from typing import Any

from stridec import errors
from stridec.errors import (
    CallError,
    LayoutError,
    ParseError,
    ShapeError,
    StridecError,
    UnsupportedError,
    BuildError,
    VerificationError,
)
from stridec.ir import builder as _builder  # attaches the builder methods
from stridec.ir.builder import cat, pad
from stridec.ir.dtypes import DTYPES, DType, as_dtype
from stridec.ir.formats import FORMATS, Format, MaskBound, Packing, PitchedRows, get_format
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout
from stridec.ir.parser import parse
from stridec.ir.types import TensorType
from stridec.runtime.backends.reference import run_reference
from stridec.runtime.compile import CompiledGraph, Plan, compile
from stridec.torch.trace import trace

del _builder

from stridec.version import __version__ as __version__  # noqa: E402


def __getattr__(name: str) -> Any:
    # `draw` pulls in matplotlib only when it runs; loading it lazily keeps `import
    # stridec` free of the drawing code (PEP 562).
    if name == "draw":
        from stridec.viz import draw

        return draw
    raise AttributeError(f"module 'stridec' has no attribute {name!r}")


__all__ = [
    "CallError",
    "CompiledGraph",
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
