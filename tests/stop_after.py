"""`--stop-after SECONDS`: a pytest run that starts no test once SECONDS have passed, and
ends as interrupted, as `-x` ends one: the tests running finish, then pytest prints its
summary and writes its junit XML. Under pytest-xdist too, where a SIGINT from a time limit
reaches only the run's process, whose workers finish every test queued to them first.
bench/gpu_first_contact.sh stops its test phases so before their deadlines.

Each worker gets the run's time to stop (the run's process hands it over when it starts
the worker) and stops after its current test; the run's process, which sees every
worker's reports, shuts the others down. tests/conftest.py takes these hooks; another run
loads the plugin with `-p stop_after` (tests/ on the path)."""

from __future__ import annotations

import time
from typing import Any

import pytest

_stop: dict[str, Any] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--stop-after", type=float, default=None, metavar="SECONDS",
        help="start no test SECONDS after the run began: the tests running finish, then "
             "the run ends as interrupted, with its summary and junit XML",
    )


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)
    if worker is not None:  # a pytest-xdist worker: its run's time
        at = worker.get("stop_after_at")
    else:
        after = config.getoption("--stop-after")
        at = None if after is None else time.time() + after
    _stop.clear()
    if at is not None:
        _stop.update(at=at, config=config, reason="--stop-after: time is up")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # pytest-xdist's, in the run's process
    if _stop:
        node.workerinput["stop_after_at"] = _stop["at"]


def pytest_sessionstart(session: pytest.Session) -> None:
    if _stop:
        _stop["session"] = session


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _stop or time.time() < _stop["at"]:
        return
    dsession = _stop["config"].pluginmanager.getplugin("dsession")
    for target in (dsession, _stop.get("session")):
        if target is not None and not target.shouldstop:
            target.shouldstop = _stop["reason"]
