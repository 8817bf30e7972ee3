"""Plan caches: a bounded in-process LRU and an on-disk store under `STRIDEC_CACHE_DIR`.

Disk entries are `plans/<key>.json` (beside the kernels: `kernels/`), written atomically
(temp file in the same folder, then `os.replace`), so a reader never sees half a file and
two processes writing the same key both leave a whole one. An entry that fails to parse,
whose recorded key differs, whose program no longer matches the checksum stored beside
it, or whose program does not hold together (a launch of a missing kernel or slot) is
discarded and rebuilt. A cache directory that cannot be created or written makes the
cache memory-only, with one warning. The disk cache holds at most
`$STRIDEC_CACHE_MAX_SIZE` (1 GiB by default): least recently used entries go first
(`trim`). `python -m stridec cache info|clear|trim` shows and empties it.

Beside them, `wisdom/<key>.json` keeps the copy plans measured choice chose
(`runtime/tune.py`): `read_wisdom`, `write_wisdom`, `remove_wisdom`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Any

from stridec.compiler.codegen.program import Program
from stridec.runtime.lru import Lru

__all__ = ["PlanCache", "cache_key", "disk_cache_dir", "MEMORY_CACHE", "DiskEntry",
           "disk_entries", "max_size", "trim", "clear", "touch", "note_written",
           "read_wisdom", "remove_wisdom", "write_wisdom"]

logger = logging.getLogger(__name__)


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

def keep_text(path: str, text: str) -> bool:
    """Make the file at `path` hold exactly `text`: (re)written, atomically, only when it
    is missing or holds something else (a kernel file another process already wrote is
    left as it is, marked as used: `touch`). Whether it was written."""
    try:
        with open(path, encoding="utf-8") as f:
            current = f.read()
    except (OSError, UnicodeDecodeError):
        current = None
    if current != text:
        write_atomically(path, text)
        return True
    touch(path)
    return False


_CACHES: weakref.WeakSet[PlanCache] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for cache in list(_CACHES):
        cache._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


class PlanCache:
    """`Program`s in memory (an `Lru`), backed by JSON files on disk."""

    def __init__(self, capacity: int = 256) -> None:
        self._memory: Lru[str, Program] = Lru(capacity)
        self._lock = threading.Lock()
        self._warned_dirs: set[str] = set()
        _CACHES.add(self)

    @property
    def capacity(self) -> int:
        """Programs kept in memory (the least recently used leave first)."""
        return self._memory.capacity

    @capacity.setter
    def capacity(self, n: int) -> None:
        self._memory.capacity = n

    def _after_fork_in_child(self) -> None:
        # A lock another thread held at the fork would stay held in the child forever;
        # what it guarded may be half updated: the child starts empty.
        if self._lock.locked():
            self._memory = Lru(self.capacity)
        self._lock = threading.Lock()

    # -- memory ------------------------------------------------------------------------
    def get_memory(self, key: str) -> Program | None:
        with self._lock:
            return self._memory.get(key)

    def put_memory(self, key: str, program: Program) -> None:
        with self._lock:
            self._memory.put(key, program)

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
            program = Program.from_json(program_text)
            touch(path)
            logger.debug("plan %s read from the disk cache", key[:16])
            return program
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
            entry = json.dumps({"key": key, "digest": _digest(text), "program": text})
            write_atomically(self._path(key), entry)
            note_written(len(entry))
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


# -- wisdom: the plans measured choice chose (`runtime/tune.py`) -------------------------


def _wisdom_path(key: str) -> str:
    return os.path.join(disk_cache_dir(), "wisdom", f"{key}.json")


def read_wisdom(key: str) -> dict[str, Any] | None:
    """The wisdom entry of `key`, a dict holding at least `key`; None where there is
    none. ValueError where a file is there but is no whole entry of that key (it is
    removed first: the caller measures again)."""
    path = _wisdom_path(key)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    try:
        entry = json.loads(raw.decode("utf-8"))
        if not isinstance(entry, dict) or entry.get("key") != key:
            raise ValueError("it belongs to no entry of this key")
    except ValueError as e:
        remove_wisdom(key)
        raise ValueError(f"{path}: {e}") from e
    touch(path)
    return entry


def remove_wisdom(key: str) -> None:
    """Remove the wisdom entry of `key` (one its reader could not use), if any."""
    try:
        os.remove(_wisdom_path(key))
    except OSError:
        pass


def write_wisdom(key: str, entry: dict[str, Any]) -> bool:
    """Keep `entry` (JSON data) as the wisdom of `key`, atomically; False where the cache
    directory cannot be written (the choice then lasts as long as the process's plans)."""
    path = _wisdom_path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        text = json.dumps({**entry, "key": key}, sort_keys=True)
        write_atomically(path, text)
    except OSError:
        return False
    note_written(len(text))
    return True


# -- the disk cache's size: least recently used entries out ------------------------------
#
# An entry is a plan (`plans/<key>.json`), a measured choice (`wisdom/<key>.json`), a
# Triton kernel module (`kernels/k_<digest>.py`) or a C unit (`kernels/c/<digest>.c`,
# `.so`, `.so.sha256`: one entry). Its last use is the newest modification time of its
# files: a disk hit touches them (`touch`). After a process has written a twentieth of
# the cap since it last looked (`note_written`), the cache is trimmed to nine tenths of
# `max_size()`, least recently used entries first. Entries used in the last
# `GRACE_SECONDS` stay: a process may be reading or building one right now. Other files
# (temporaries, foreign files) are never touched.

DEFAULT_MAX_SIZE = 2**30
GRACE_SECONDS = 60.0
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int | None:
    """Bytes of a size as `STRIDEC_CACHE_MAX_SIZE` takes it: `1073741824`, `500M`,
    `2G`, `1.5G` (K, M, G, T: powers of 1024; a trailing `B` or `iB` allowed); None for
    `none` or `unlimited`. ValueError for anything else."""
    word = text.strip().upper().removesuffix("IB").removesuffix("B")
    if word in ("NONE", "UNLIMITED"):
        return None
    scale = _UNITS.get(word[-1:], 1)
    number = word[:-1] if word[-1:] in _UNITS else word
    value = float(number)
    if not 0 <= value < float("inf"):  # NaN fails too
        raise ValueError(text)
    return int(value * scale)


_warned_size: set[str] = set()


def max_size() -> int | None:
    """The disk cache's cap in bytes: `$STRIDEC_CACHE_MAX_SIZE` (e.g. `500M`, `2G`,
    `unlimited`), by default 1 GiB; a value that does not parse warns once and keeps the
    default."""
    text = os.environ.get("STRIDEC_CACHE_MAX_SIZE")
    if not text:
        return DEFAULT_MAX_SIZE
    try:
        return parse_size(text)
    except ValueError:
        if text not in _warned_size:
            _warned_size.add(text)
            warnings.warn(
                f"stridec: STRIDEC_CACHE_MAX_SIZE={text!r} is not a size (expected bytes, "
                f"or a number with K, M, G or T, or 'unlimited'); the cap stays "
                f"{format_bytes(DEFAULT_MAX_SIZE)}",
                RuntimeWarning,
                stacklevel=3,
            )
        return DEFAULT_MAX_SIZE


def format_bytes(n: float) -> str:
    """`1.5 MiB`, `812 B`."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class DiskEntry:
    """One entry of the disk cache: its `kind` ("plan", "wisdom", "triton" or "c"), files, bytes
    and last use (the newest modification time of its files, seconds since the epoch)."""

    kind: str
    files: tuple[str, ...]
    size: int
    used: float


# (kind, folder under the cache dir, what an entry's file names look like)
_LAYOUT = (
    ("plan", "plans", re.compile(r"([0-9a-f]{64})\.json\Z")),
    ("wisdom", "wisdom", re.compile(r"([0-9a-f]{64})\.json\Z")),
    ("triton", "kernels", re.compile(r"(k_[0-9a-f]+)\.py\Z")),
    ("c", os.path.join("kernels", "c"), re.compile(r"([0-9a-f]{32})\.(?:c|so|so\.sha256)\Z")),
)


def disk_entries(folder: str | None = None) -> list[DiskEntry]:
    """Every entry of the disk cache at `folder` (default `disk_cache_dir()`); files that
    are no entry's (temporaries, foreign files) are not listed."""
    root = disk_cache_dir() if folder is None else folder
    found = []
    for kind, sub, pattern in _LAYOUT:
        groups: dict[str, list[tuple[str, int, float]]] = {}
        try:
            scan = list(os.scandir(os.path.join(root, sub)))
        except OSError:
            continue
        for item in scan:
            m = pattern.match(item.name)
            if m is None:
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:  # removed meanwhile
                continue
            if not item.is_file(follow_symlinks=False):
                continue
            groups.setdefault(m.group(1), []).append((item.path, st.st_size, st.st_mtime))
        for files in groups.values():
            found.append(DiskEntry(kind, tuple(sorted(f[0] for f in files)),
                                   sum(f[1] for f in files), max(f[2] for f in files)))
    return found


def _remove_entry(entry: DiskEntry) -> int:
    """Remove an entry's files (a C unit's library before its source: a reader that
    finds the library finds it whole or not at all); the bytes removed."""
    freed = 0
    for path in sorted(entry.files, key=lambda p: (not p.endswith(".so"), p)):
        try:
            size = os.stat(path).st_size
            os.remove(path)
            freed += size
        except OSError:  # removed meanwhile by another process
            pass
    return freed


def trim(limit: int | None = None, *, grace: float | None = None,
         folder: str | None = None) -> tuple[int, int]:
    """Remove least recently used entries until the cache holds at most `limit` bytes
    (default: nine tenths of `max_size()`; nothing when there is no cap), keeping entries
    used in the last `grace` seconds (default `GRACE_SECONDS`). Returns (entries, bytes)
    removed. Safe while other processes use the cache: one that finds an entry gone
    rebuilds it."""
    if limit is None:
        cap = max_size()
        if cap is None:
            return 0, 0
        limit = cap * 9 // 10
    grace = GRACE_SECONDS if grace is None else grace
    entries = sorted(disk_entries(folder), key=lambda e: e.used)
    total = sum(e.size for e in entries)
    now = time.time()
    removed = freed = 0
    for entry in entries:
        if total <= limit or entry.used > now - grace:
            break
        gone = _remove_entry(entry)
        total -= entry.size
        removed += 1
        freed += gone
    if removed:
        logger.info("disk cache trimmed: %d entries, %s removed, %s left (cap %s)",
                    removed, format_bytes(freed), format_bytes(total),
                    format_bytes(limit))
    return removed, freed


def clear(folder: str | None = None) -> tuple[int, int]:
    """Remove every entry of the disk cache (its folders stay); (entries, bytes)."""
    entries = disk_entries(folder)
    return len(entries), sum(_remove_entry(e) for e in entries)


_written = [0]  # bytes this process wrote into the cache since it last trimmed


def note_written(nbytes: int) -> None:
    """Count bytes this process wrote into the disk cache; trim when they reach a
    twentieth of the cap (and on the first write of the process)."""
    cap = max_size()
    if cap is None:
        return
    first = _written[0] == 0
    _written[0] += max(int(nbytes), 1)
    if first or _written[0] >= cap // 20:
        _written[0] = 1
        try:
            trim()
        except OSError:
            pass


def touch(*paths: str) -> None:
    """Mark files as just used (their modification time: what `trim` orders by)."""
    for path in paths:
        try:
            os.utime(path)
        except OSError:
            pass
