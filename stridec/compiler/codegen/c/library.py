"""The C library shipped in the package (`stridec/compiler/codegen/c/lib/`), as Python reads it.

* `library_text(name)` — a file's text.
* `unit_text(name)` — a `.c` file as one self-contained text: each `#include "file"` of
  a library file replaced by that file's text (recursively, every time it appears: a
  header written to be included once per variant is), so a unit's source is all of what
  the compiler reads and the build cache's key covers it. `#include <...>` stays.
  `with_includes(text)` does the same for a C text kept outside `lib/`.
* `macro_fields(text, name)` — the field names of an X-macro list
  `#define name(X) X(a) X(b) ...` (an argument block's layout, declared once in a header
  that the C reads and Python fills from); `define_number(text, name)` — the value of
  `#define name 123`.
"""

from __future__ import annotations

import re
from importlib import resources

__all__ = ["define_number", "library_text", "macro_fields", "unit_text", "with_includes"]

_INCLUDE = re.compile(r'^#include "([\w.]+)"$', re.M)


def library_text(name: str) -> str:
    return (resources.files("stridec.compiler.codegen.c") / "lib" / name).read_text("utf-8")


def unit_text(name: str) -> str:
    """lib/`name` with its includes of library files pasted in place."""
    return with_includes(library_text(name))


def with_includes(text: str) -> str:
    """`text` (C) with its includes of library files pasted in place (a C file kept
    elsewhere that includes one of them: `runtime/backends/calls.c`)."""
    return _INCLUDE.sub(lambda found: unit_text(found.group(1)).rstrip("\n"), text)


def _macro_body(text: str, name: str) -> str:
    found = re.search(rf"#define {name}\(X\)((?:.*\\\n)*.*)", text)
    if found is None:
        raise ValueError(f"C library: no {name}(X) list")
    return re.sub(r"/\*.*?\*/", "", found.group(1))


def macro_fields(text: str, name: str) -> tuple[str, ...]:
    """The names `X(a) X(b) ...` of the X-macro list `name` in `text`, in order."""
    return tuple(re.findall(r"X\((\w+)\)", _macro_body(text, name)))


def define_number(text: str, name: str) -> int:
    found = re.search(rf"^#define {name} (\d+)$", text, re.M)
    if found is None:
        raise ValueError(f"C library: no #define {name}")
    return int(found.group(1))
