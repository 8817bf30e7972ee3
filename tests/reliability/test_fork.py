"""stridec in processes that fork or spawn: every lock, pool and cache of the process is
safe in a forked child (`os.register_at_fork` hands the child fresh Python locks; the C
thread pool resets its own with `pthread_atfork`), so nothing hangs. Each scenario of
`fork_scenarios.py` runs in a process of its own, bounded in time: a hung child is
killed by the scenario's own deadline, a hung scenario by the timeout here.

- a fork while another thread is inside a C build (the build lock held);
- a fork while another thread holds every lock of stridec's;
- forks after kernels ran on several threads, another thread still calling them;
- DataLoader with num_workers=2 (forked workers) while another thread compiles;
- multiprocessing with spawn.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stridec.runtime.backends.cpu import available

pytestmark = pytest.mark.skipif(not available(), reason="needs a C compiler")

SCRIPT = Path(__file__).with_name("fork_scenarios.py")
# Each scenario's whole run, its children and a build included; its children's own
# deadline is shorter (CHILD_SECONDS), so a hang is reported by the scenario itself.
TIMEOUT = 240


@pytest.mark.parametrize("scenario", ["fork_during_build", "fork_with_every_lock_held",
                                      "fork_after_threads", "dataloader_workers",
                                      "spawn_workers"])
def test_forked_and_spawned_processes_finish(scenario: str, tmp_path: Path) -> None:
    env = {**os.environ, "CHILD_SECONDS": "90",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[2]),
                                                        os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(SCRIPT), scenario, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]


_CHILD_EXITS = """
import os, sys
from stridec.runtime.backends import triton as backend
path = backend._private_kernel_dir()
pid = os.fork()
if pid == 0:
    sys.exit(0)  # a normal exit runs the exit hooks the child inherited
os.waitpid(pid, 0)
print(os.path.isdir(path))
"""


def test_a_forked_child_leaves_the_parents_private_kernel_folder() -> None:
    """The folder Triton kernels fall back to when the cache cannot be written belongs to
    the process that made it: a forked child's exit does not delete it."""
    pytest.importorskip("triton")
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[2]),
                                                        os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", _CHILD_EXITS], env=env, capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True"]
