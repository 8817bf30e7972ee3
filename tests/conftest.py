"""Shared test setup: `gpu` tests skip cleanly without CUDA; the kernel and plan caches
live in a per-session temporary folder so tests never touch the user's cache."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch

_CACHE = tempfile.mkdtemp(prefix="stridec-test-cache-")
os.environ.setdefault("STRIDEC_CACHE_DIR", _CACHE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
