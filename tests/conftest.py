"""Shared test setup: `gpu` tests skip cleanly without CUDA; the kernel and plan caches
live in a per-session temporary folder so tests never touch the user's cache; under CI
hypothesis draws deterministically."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
from hypothesis import settings

# CI runs the same examples every time (a red CI blocks landing, so it must not depend on
# the draw); local runs keep hypothesis' random search, which is how new bugs are found.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

_CACHE = tempfile.mkdtemp(prefix="stridec-test-cache-")
os.environ.setdefault("STRIDEC_CACHE_DIR", _CACHE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
