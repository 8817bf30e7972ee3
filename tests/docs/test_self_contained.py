"""The repository speaks only of itself: no tracked file points at a design text or a
folder outside the checkout, and every anchor into docs/design.md a file cites is a heading
of docs/design.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Spelled in pieces so that this file does not match itself.
OUTSIDE = [".." + "/shared", "SPEC" + ".md", "SPEC" + " §"]


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_file_refers_outside_the_repository() -> None:
    offenders = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files, or a file deleted in the working tree
        for number, line in enumerate(text.splitlines(), 1):
            for needle in OUTSIDE:
                if needle in line:
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "references outside the repository:\n" + "\n".join(offenders)


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#+\s+(.*)$", markdown, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_every_design_anchor_cited_exists() -> None:
    known = anchors((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    missing = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for match in re.finditer(r"design\.md#([\w-]+)((?:, #[\w-]+)*)", text):
            cited = [match.group(1)] + re.findall(r"#([\w-]+)", match.group(2))
            missing += [f"{path.relative_to(ROOT)}: #{a}" for a in cited if a not in known]
    assert not missing, "anchors docs/design.md does not have:\n" + "\n".join(missing)


def test_relative_links_in_markdown_resolve() -> None:
    """`[text](path)` and `[text](path#anchor)` in a tracked markdown file name a file of
    the repository (a heading, for an anchor into docs/design.md)."""
    known = anchors((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    broken = []
    for path in tracked_files():
        if path.suffix != ".md" or not path.exists():
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            if not resolved.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
            elif anchor and resolved.name == "design.md" and anchor not in known:
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "links to nothing:\n" + "\n".join(broken)
