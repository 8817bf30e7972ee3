"""The code blocks of the markdown pages (README.md and docs/*.md), for the docs tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```+|~~~+)(.*)$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    flags: tuple[str, ...]
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """The fenced blocks of a page, in order (an indented code block is one of language
    "indented", which no test accepts)."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    previous = ""  # the last line outside a fence
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            line = lines[i]
            if (
                line.startswith("    ")
                and line.strip()
                and not previous.strip()
                and not _in_list(lines, i)
            ):
                found.append(Block(page, i + 1, "indented", (), line + "\n"))
            previous = line
            i += 1
            continue
        fence, info = m.group(1), m.group(2).split()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{page.relative_to(ROOT)}:{start + 1}: unclosed fence")
        i += 1
        found.append(
            Block(page, start + 1, info[0] if info else "", tuple(info[1:]),
                  "".join(line + "\n" for line in body))
        )
        previous = ""
    return found


def _in_list(lines: list[str], i: int) -> bool:
    """Whether line i continues a list item (an indented paragraph under `- ` or `1. `)."""
    for j in range(i - 1, -1, -1):
        line = lines[j]
        if not line.strip():
            continue
        if re.match(r"\s*([-*+]|\d+\.)\s", line):
            return True
        if not line.startswith(" "):
            return False
    return False
