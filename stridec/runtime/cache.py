"""Plan caches: a bounded in-process LRU and an on-disk store under `STRIDEC_CACHE_DIR`.

Disk entries are `plans/<key>.json`, written atomically (temp file in the same folder,
then `os.replace`), so a reader never sees half a file and two processes writing the same
key both leave a whole one. An entry that fails to parse, whose recorded key differs,
whose program no longer matches the checksum stored beside it, or whose program does not
hold together (a launch of a missing kernel or slot) is discarded and rebuilt. A cache
directory that cannot be created or written makes the cache memory-only, with one warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import warnings
import weakref
from collections import OrderedDict
from typing import Any

from stridec.compiler.codegen.program import Program

__all__ = ["PlanCache", "cache_key", "disk_cache_dir", "MEMORY_CACHE"]


def disk_cache_dir() -> str:
    """The one folder stridec caches in (plans and kernel modules): `$STRIDEC_CACHE_DIR`,
    else `$XDG_CACHE_HOME/stridec`, else `~/.cache/stridec`."""
    chosen = os.environ.get("STRIDEC_CACHE_DIR")
    if chosen:
        return chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "stridec")


def cache_key(parts: dict[str, Any]) -> str:
    """A stable hash of the key parts (graph text, specialization, versions, device)."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _digest(program_text: str) -> str:
    """Checksum of an entry's program: a flipped byte that still parses is caught too."""
    return hashlib.sha256(program_text.encode()).hexdigest()


def write_atomically(path: str, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path` so that no reader sees half of it: a temporary
    file in the same folder, then a rename; the temporary never stays behind."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise

def keep_text(path: str, text: str) -> None:
    """Make the file at `path` hold exactly `text`: (re)written, atomically, only when it
    is missing or holds something else (a kernel file another process already wrote is
    left as it is)."""
    try:
        with open(path, encoding="utf-8") as f:
            current = f.read()
    except (OSError, UnicodeDecodeError):
        current = None
    if current != text:
        write_atomically(path, text)


_CACHES: weakref.WeakSet[PlanCache] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for cache in list(_CACHES):
        cache._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


class PlanCache:
    """LRU of `Program`s in memory, backed by JSON files on disk."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._memory: OrderedDict[str, Program] = OrderedDict()
        self._lock = threading.Lock()
        self._warned_dirs: set[str] = set()
        _CACHES.add(self)

    def _after_fork_in_child(self) -> None:
        # A lock another thread held at the fork would stay held in the child forever;
        # what it guarded may be half updated: the child starts empty.
        if self._lock.locked():
            self._memory = OrderedDict()
        self._lock = threading.Lock()

    # -- memory ------------------------------------------------------------------------
    def get_memory(self, key: str) -> Program | None:
        with self._lock:
            program = self._memory.get(key)
            if program is not None:
                self._memory.move_to_end(key)
            return program

    def put_memory(self, key: str, program: Program) -> None:
        with self._lock:
            self._memory[key] = program
            self._memory.move_to_end(key)
            while len(self._memory) > self.capacity:
                self._memory.popitem(last=False)

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()

    # -- disk --------------------------------------------------------------------------
    def _path(self, key: str) -> str:
        return os.path.join(disk_cache_dir(), "plans", f"{key}.json")

    def get_disk(self, key: str) -> Program | None:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError:
            return None
        try:
            envelope = json.loads(raw.decode("utf-8"))  # UnicodeDecodeError is a ValueError
            if envelope.get("key") != key:
                raise ValueError("the entry belongs to another key")
            program_text = envelope["program"]
            if envelope.get("digest") != _digest(program_text):
                raise ValueError("the entry's digest does not match its program")
            return Program.from_json(program_text)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
            try:  # corrupt or foreign: discard it; the caller rebuilds
                os.remove(path)
            except OSError:
                pass
            return None

    def put_disk(self, key: str, program: Program) -> None:
        folder = os.path.dirname(self._path(key))
        try:
            os.makedirs(folder, exist_ok=True)
            text = program.to_json()
            entry = {"key": key, "digest": _digest(text), "program": text}
            write_atomically(self._path(key), json.dumps(entry))
        except OSError as e:
            if folder not in self._warned_dirs:
                self._warned_dirs.add(folder)
                warnings.warn(
                    f"stridec: cache directory {folder!r} is not writable ({e}); "
                    "plans are cached in memory only",
                    RuntimeWarning,
                    stacklevel=3,
                )


MEMORY_CACHE = PlanCache()
