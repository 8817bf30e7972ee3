"""Checks that a file is what its suffix says: a PNG (signature and IHDR chunk) or an SVG
(well-formed XML whose root is <svg>)."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from pathlib import Path

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, after checking the signature and chunk type."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    return struct.unpack(">II", data[16:24])


def assert_png(path: Path) -> None:
    width, height = png_size(path)
    assert width > 100 and height > 100, (path, width, height)


def assert_svg(path_or_text: Path | str) -> None:
    text = path_or_text.read_text() if isinstance(path_or_text, Path) else path_or_text
    root = ET.fromstring(text.encode())
    assert root.tag.endswith("svg")
