"""Compile units built in parts: one source, several compiler processes at once.

Most of a C unit's build time is gcc optimizing a few large functions (a transpose's
tile, its streamed and narrow forms; Philox's eight variants), one after another. A unit
whose source says `#define STRIDEC_PARTS n` is built by the runtime as n objects at
once, the k-th compiled with `-DSTRIDEC_PART=k`, then linked into one library
(`runtime/backends/cpu.py`); on a machine with two cores the build takes a little more
than its largest part.

The source is written for both builds with `PARTS_DECLARATION` (`lib/parts.h`), pasted
near its top:

* `#if IN_PART(k) … #endif` around what part k alone defines. What no part claims (the
  prelude, the `static inline` helpers) is in every part; the compiler drops a static
  function that its part never calls before it optimizes anything, so only what a part
  uses costs it time.
* `PART_FN` on a function defined in one part and called from another: declared in both,
  a hidden symbol of the library when built in parts, `static` when built whole. Either
  way it is never inlined, so the two builds make the same calls.
* The entry points the runtime looks up are in exactly one part.

Built whole (no `STRIDEC_PART`: the tests that compile a unit for another instruction
set, `gcc -S` to read its assembly) every part is in the one object.
"""

from __future__ import annotations

import re

from stridec.compiler.codegen.c.library import library_text

__all__ = ["PARTS_DECLARATION", "unit_parts"]

PARTS_DECLARATION = library_text("parts.h")

_PARTS = re.compile(r"^#define STRIDEC_PARTS ([1-9][0-9]*)$", re.M)


def unit_parts(source: str) -> int:
    """How many parts `source` is built in: its `#define STRIDEC_PARTS n`, else 1."""
    found = _PARTS.search(source)
    return int(found.group(1)) if found else 1
