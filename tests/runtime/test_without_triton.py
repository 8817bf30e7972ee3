"""Triton is an extra (`stridec[triton]`): without it, CPU tensors run on the `cpu`
backend as before, stridec-opt prints Triton source, and asking for what needs Triton
(`interpret`, `triton`, `auto` with no C compiler) is an `UnsupportedError` naming the
extra. A process where `import triton` fails stands for a machine without it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from markdown_blocks import ROOT

CHILD = r"""
import contextlib, io, json, os, sys
sys.modules["triton"] = None          # `import triton` fails, as where it is not installed
import torch, stridec
from stridec.tools.opt import main as opt

found = {}
g = stridec.Graph("t")
x = g.input("x", (2, 3), "float32")
g.output(x.t().contiguous())
t = torch.randn(2, 3)
fn = stridec.compile(g)
found["auto"] = bool(torch.equal(fn(t), t.t().contiguous())) and fn.ran_on == ("cpu",)
op = fn.as_torch_op("without_triton::t")
found["op"] = bool(torch.equal(op(t), t.t().contiguous()))
for backend in ("interpret", "triton"):
    try:
        stridec.compile(g, backend=backend)
        found[backend] = "no error"
    except stridec.UnsupportedError as e:
        found[backend] = str(e)
path = sys.argv[1]
with open(path, "w") as f:
    f.write(str(g))
out = io.StringIO()
with contextlib.redirect_stdout(out):
    found["opt"] = opt(["--emit=triton", path])
found["opt_kernels"] = out.getvalue().count("@triton.jit")
os.environ["STRIDEC_CC"] = "/no/such/cc"
try:
    stridec.compile(g)(t)
    found["no_cc"] = "no error"
except stridec.UnsupportedError as e:
    found["no_cc"] = str(e)
found["imported"] = sys.modules.get("triton") is not None
print(json.dumps(found))
"""


def test_without_triton(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("STRIDEC_CC", "CC")}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "t.ir")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["auto"] and found["op"]
    extra = 'pip install "stridec[triton]"'
    for backend in ("interpret", "triton"):
        assert f"backend {backend!r} needs Triton" in found[backend]
        assert extra in found[backend]
    assert (found["opt"], found["opt_kernels"]) == (0, 1)  # printing source needs no Triton
    assert "no working C compiler ('/no/such/cc'" in found["no_cc"] and extra in found["no_cc"]
    assert not found["imported"]


def test_the_triton_pins_agree() -> None:
    """The `triton` extra and the `dev` extra (which the tests need) pin the same range;
    the default dependencies have no Triton."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    deps = re.search(r"^dependencies = \[(.*?)\]", pyproject, re.M | re.S).group(1)
    assert "triton" not in deps
    extras = dict(re.findall(r"^(\w+) = \[(.*?)\]", pyproject.split("[project.optional-"
                                                                  "dependencies]")[1],
                             re.M | re.S))
    pins = {k: re.findall(r'"triton[^"]*"', v) for k, v in extras.items()}
    assert pins["triton"] == pins["dev"] and len(pins["triton"]) == 1
