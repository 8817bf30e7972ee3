"""CI runs what the README tells a user to run: `.ci/run` reads the README's two commands
and runs them as written; here they are checked against the README as a reader sees it,
and against what they must do on a machine without a GPU."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from markdown_blocks import ROOT, blocks_of

README = ROOT / "README.md"


def readme_commands() -> list[str]:
    """The `sh` blocks between "## Two commands" and the next section."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Two commands\n")
    end = text.index("\n## ", start + 1)
    first, last = text[:start].count("\n") + 1, text[:end].count("\n") + 1
    return [
        b.text.strip() for b in blocks_of(README) if b.language == "sh" and first < b.line < last
    ]


def ci_print_commands() -> list[str]:
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run"), "--print-commands"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    return done.stdout.splitlines()


def readme_long_tail() -> str:
    """The one `sh` block of the section "The long tail of the tests"."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## The long tail of the tests\n")
    end = text.index("\n## ", start + 1)
    first, last = text[:start].count("\n") + 1, text[:end].count("\n") + 1
    (block,) = [b.text.strip() for b in blocks_of(README)
                if b.language == "sh" and first < b.line < last]
    return block


def test_ci_runs_the_readme_commands_as_written() -> None:
    commands = readme_commands()
    assert len(commands) == 2
    assert ci_print_commands()[:3] == [*commands, readme_long_tail()]


def test_the_long_tail_runs_what_the_suite_skips() -> None:
    """In the venv the test command made: the tests marked `long`, on every core."""
    steps = [step.strip() for step in readme_long_tail().split("&&")]
    assert steps == [". .venv/bin/activate", "python -m pytest -q -n auto -m long"]


@pytest.mark.parametrize("index", [0, 1])
def test_each_command_is_complete_and_installs_cpu_torch_first(index: int) -> None:
    """Copy-paste complete on a fresh machine: a new venv, activated, torch pinned before
    stridec (so pip does not resolve a CUDA torch for it), then the job itself."""
    steps = [step.strip() for step in readme_commands()[index].split("&&")]
    assert steps[:3] == [
        "python3 -m venv .venv", ". .venv/bin/activate", "pip install torch==2.13.0"
    ]
    assert re.fullmatch(r'pip install -e (\.|"\.\[dev\]")', steps[3])
    assert steps[4] == ("python examples/quickstart.py", "python -m pytest -q -n auto")[index]


def _supported(name: str) -> tuple[str, str]:
    """The oldest and the newest `name` pyproject accepts ("X" of ">=X", the minor below
    "<Y")."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    low, high = re.search(rf'"{name}>=([0-9.]+),<([0-9.]+)"', pyproject).groups()
    return low, f"{high.split('.')[0]}.{int(high.split('.')[1]) - 1}"


def test_ci_tests_the_oldest_torch_and_triton_pyproject_accepts() -> None:
    (torch_low, torch_high), (triton_low, triton_high) = _supported("torch"), _supported("triton")
    assert ci_print_commands()[3:5] == [f"triton=={triton_low}.*", f"torch=={torch_low}.*"]
    readme = README.read_text(encoding="utf-8")
    assert (f"torch {torch_low} to {torch_high} and Triton {triton_low} to {triton_high} are "
            f"supported") in " ".join(readme.split())
    # The README's command for the whole suite at the oldest installs exactly those.
    section = readme.split("\n## Oldest supported torch and Triton\n", 1)[1].split("\n## ")[0]
    (command,) = [b.text.strip() for b in blocks_of(README) if b.language == "sh"
                  and b.text.strip() in section]
    assert f"pip install torch=={torch_low}.0 triton=={triton_low}.0 &&" in command
    assert command.endswith('pip install -e ".[dev]" && python -m pytest -q -n auto')


def test_the_readme_commands_install_the_newest_torch_pyproject_accepts() -> None:
    for command in readme_commands():
        pinned = re.search(r"pip install torch==([0-9]+\.[0-9]+)\.[0-9]+ ", command).group(1)
        assert pinned == _supported("torch")[1]
