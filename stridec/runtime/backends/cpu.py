"""The `cpu` backend: the program's kernels as native code for the host CPU,
C built by the system compiler and loaded with ctypes.

A compile unit (one copy class, `codegen/c/copy.py`) is built once into a shared library
and cached on disk beside the Triton kernels, `<kernel dir>/c/<digest>.so`, where the
digest covers the C source, the compiler (its path, size and modification time, so an
upgraded compiler rebuilds), the flags, and the host CPU's model and feature flags: the
library is built with `-march=native`, and one built for another machine's vector
extensions must never load here. Next to it, `<digest>.c` keeps the source (a failed
build names it) and `<digest>.so.sha256` the library's checksum, written after the
library: a library whose bytes no longer match, or that the dynamic loader refuses, is
rebuilt. Both are written atomically (temporary name in the same folder, then rename),
so concurrent processes never load half a file.

The compiler is `$STRIDEC_CC`, else `$CC`, else `gcc`. A unit whose source says
`#define STRIDEC_PARTS n` (`codegen/c/parts.py`) is compiled as n objects by n compiler
processes at once, then linked. A missing compiler or a failed build raises `BuildError`
naming the tool and the kept source file. `BUILD_STATS` counts compiler runs and their
time in this process.
"""

from __future__ import annotations

import array
import ctypes
import errno
import functools
import hashlib
import inspect
import json
import logging
import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import torch

from stridec.compiler.codegen.c.copy import UNIT_SEPARATOR
from stridec.compiler.codegen.c.library import library_text, macro_fields, with_includes
from stridec.compiler.codegen.c.parts import unit_parts
from stridec.compiler.codegen.c.pool import (
    POOL_BATCH_SYMBOL,
    POOL_C_SOURCE,
    POOL_OPENMP_SYMBOL,
    POOL_SYMBOL,
    STREAM_SYMBOL,
)
from stridec.compiler.codegen.program import KernelInfo, Program
from stridec.compiler.host import read_caches
from stridec.errors import BuildError, CallError, InternalError, VerificationError
from stridec.runtime.backends import CallForm
from stridec.runtime.cache import (
    disk_cache_dir,
    keep_text,
    note_written,
    touch,
    write_atomically,
)

__all__ = [
    "BACKEND",
    "BUILD_STATS",
    "BuildStats",
    "CFLAGS",
    "SANITIZERS",
    "CpuBackend",
    "CpuKernel",
    "available",
    "compiler",
    "load_c_kernel",
    "load_pool",
    "load_unit",
    "source_files",
    "last_level_cache_bytes",
    "sanitize_flags",
    "set_stream_threshold",
    "stream_threshold",
    "torch_openmp_entry",
    "unit_key",
    "use_torch_openmp",
]

CFLAGS = ("-O3", "-march=native", "-std=gnu11", "-shared", "-fPIC", "-pthread",
          "-fno-strict-aliasing", "-Wall", "-Wno-unused-function")
BUILD_FORMAT = 2  # 2: units in parts (codegen/c/parts.py)


@dataclass
class BuildStats:
    """Compiler runs in this process (libraries built: one a unit, whole or in parts),
    their total wall time (seconds), libraries loaded from the disk cache instead, and the
    compiler processes the runs started (a unit in parts: one a part, and the link)."""

    compiler_runs: int = 0
    compile_seconds: float = 0.0
    disk_loads: int = 0
    compiler_processes: int = 0


BUILD_STATS = BuildStats()
logger = logging.getLogger(__name__)
_lock = threading.RLock()
_units: dict[str, Any] = {}  # digest -> loaded ctypes library
_toolchain: dict[tuple[str, tuple[str, ...]], str] = {}


def _after_fork_in_child() -> None:
    # A fork copies a lock held by another thread (a build under way) held, and no thread
    # of the child will release it. The loaded libraries stay mapped and valid; the thread
    # pool resets its own state (codegen/c/pool.py).
    global _lock
    _lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def compiler() -> str:
    """The C compiler command: `$STRIDEC_CC`, else `$CC`, else `gcc`."""
    return os.environ.get("STRIDEC_CC") or os.environ.get("CC") or "gcc"


def _cpu_features() -> str:
    """The host CPU's model and feature flags (what `-march=native` targets)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = ("vendor_id", "model name", "cpu family", "model\t", "flags", "Features",
              "CPU implementer", "CPU part")
    seen = []
    for line in lines:
        if line.startswith(wanted) and line not in seen:
            seen.append(line)
        if not line.strip() and seen:
            break  # the first processor describes them all
    return f"{platform.machine()}\n" + "\n".join(seen)


# The sanitizers `$STRIDEC_SANITIZE` may name (`-fsanitize=` of gcc and clang).
SANITIZERS = ("address", "undefined", "alignment", "bounds", "pointer-overflow")


def sanitize_flags() -> tuple[str, ...]:
    """The flags of `$STRIDEC_SANITIZE`, a comma-separated list of `SANITIZERS` (e.g.
    "address,undefined"): the C units built with those sanitizers, every finding fatal;
    none where it is unset. For tests (tests/reliability/test_sanitized.py): the process
    that loads such units must have the sanitizers' runtime loaded first (LD_PRELOAD)."""
    text = os.environ.get("STRIDEC_SANITIZE", "").strip()
    if not text:
        return ()
    names = [n.strip() for n in text.split(",")]
    unknown = [n for n in names if n not in SANITIZERS]
    if unknown:
        raise VerificationError(
            f"STRIDEC_SANITIZE: expected a comma-separated list of {', '.join(SANITIZERS)}; "
            f"got {text!r}"
        )
    # -O1 (after CFLAGS' -O3, so it wins): gcc takes half the time on the copy library;
    # the -O3 build's bounds are the guard-page tests' to check.
    return (f"-fsanitize={','.join(names)}", "-fno-sanitize-recover=all", "-O1",
            "-fno-omit-frame-pointer")


def _flags() -> tuple[str, ...]:
    return (*CFLAGS, *sanitize_flags())


def _toolchain_key(cc: str) -> str:
    """What a library depends on besides its source: compiler binary, flags, CPU."""
    flags = _flags()
    key = _toolchain.get((cc, flags))
    if key is None:
        argv = shlex.split(cc)
        path = shutil.which(argv[0]) if argv else None
        if path is None:
            return ""
        real = os.path.realpath(path)
        st = os.stat(real)
        parts = [f"format {BUILD_FORMAT}", cc, real, str(st.st_size), str(st.st_mtime_ns),
                 " ".join(flags), _cpu_features()]
        key = hashlib.sha256("\n".join(parts).encode()).hexdigest()
        _toolchain[cc, flags] = key
    return key


def _unit_dir() -> str:
    """`<kernel dir>/c`, created where it can be: where units are looked up (a read-only
    cache filled by another process serves), and built where it takes their files
    (`_build_anywhere`: else in a private folder, warned once)."""
    path = os.path.join(disk_cache_dir(), "kernels", "c")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        pass  # read-only, full, or under a file: nothing is found there
    return path


def _sha256_file(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _build(cc: str, source_path: str, lib_path: str, parts: int = 1, *,
           compile_from: str | None = None, extra: tuple[str, ...] = ()) -> None:
    """Compile `source_path` (or the copy of it at `compile_from`) into `lib_path`
    (atomically); BuildError naming `source_path` on failure. A unit in `parts`
    (`codegen/c/parts.py`) is compiled as that many objects at once, then linked."""
    compiled = compile_from or source_path
    argv = shlex.split(cc)
    if not argv or shutil.which(argv[0]) is None:
        raise BuildError(
            f"cpu backend: C compiler {cc!r} not found (set STRIDEC_CC or CC); "
            f"the kernel source is kept at {source_path}"
        )
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(lib_path), prefix=".tmp-", suffix=".so")
    os.close(fd)
    objects = [f"{tmp[:-3]}-{k}.o" for k in range(1, parts + 1)] if parts > 1 else []
    flags = (*_flags(), *extra)
    if objects:
        steps = [[[*argv, *flags, "-c", f"-DSTRIDEC_PART={k}", "-o", obj, compiled]
                  for k, obj in enumerate(objects, 1)],
                 [[*argv, *flags, "-o", tmp, *objects]]]
    else:
        steps = [[[*argv, *flags, "-o", tmp, compiled]]]
    start = time.perf_counter()
    try:
        for step in steps:
            _run_at_once(cc, step, source_path)
    except BaseException:
        _remove(tmp)
        raise
    finally:
        for obj in objects:
            _remove(obj)
        BUILD_STATS.compiler_runs += 1
        BUILD_STATS.compiler_processes += sum(len(step) for step in steps)
        BUILD_STATS.compile_seconds += time.perf_counter() - start
    with open(tmp, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    os.replace(tmp, lib_path)
    write_atomically(lib_path + ".sha256", digest.encode())


def _run_at_once(cc: str, commands: list[list[str]], source_path: str) -> None:
    """Run the compiler `commands` side by side; BuildError naming the first that failed."""
    running = []
    try:
        for command in commands:
            running.append(subprocess.Popen(command, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True))
    except OSError as e:
        for process in running:
            process.kill()
            process.communicate()
        raise BuildError(
            f"cpu backend: could not run C compiler {cc!r} ({e}); the kernel source is "
            f"kept at {source_path}"
        ) from e
    outputs = [process.communicate()[0] for process in running]
    for process, output in zip(running, outputs, strict=True):
        if process.returncode != 0:
            tail = (output or "").strip()[-2000:]
            raise BuildError(
                f"cpu backend: C compiler {cc!r} failed with exit status {process.returncode} "
                f"on {source_path}: {tail}"
            )


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def load_pool() -> Any:
    """The thread pool's library (`codegen/c/pool.py`), loaded with its symbols global:
    the kernel units (and any library built from their sources) call into it. Where torch
    runs its parallel loops on OpenMP, the pool is pointed at that runtime, so kernels run
    on torch's own threads (`use_torch_openmp`)."""
    global _pool_joined
    lib = load_unit(POOL_C_SOURCE, shared=True)
    if not _pool_joined:
        with _lock:
            if not _pool_joined:
                use_torch_openmp(True, lib)
                _stream_word(lib).value = default_stream_threshold()
                _pool_joined = True
    return lib


def last_level_cache_bytes() -> int | None:
    """The size of the largest cache of CPU 0 (`/sys/devices/system/cpu/cpu0/cache`, read by
    `stridec.compiler.host`), or None where it cannot be read. (glibc's `sysconf` reports
    the whole package's L3 on some virtual machines, 384 MiB where a core reaches 32 MiB.)"""
    caches = read_caches()
    return None if caches is None else caches.last_level


def default_stream_threshold() -> int:
    """`$STRIDEC_STREAM_BYTES` if set (-1: never stream), else half the last-level cache
    (docs/cpu.md, "Streaming stores"); -1 where its size is unknown."""
    text = os.environ.get("STRIDEC_STREAM_BYTES")
    if text is not None and text.strip():
        try:
            return int(text)
        except ValueError as e:
            raise VerificationError(
                f"STRIDEC_STREAM_BYTES: expected an integer number of bytes (-1: never "
                f"stream); got {text!r}"
            ) from e
    llc = last_level_cache_bytes()
    return -1 if llc is None else llc // 2


def _stream_word(lib: Any) -> Any:
    return ctypes.c_int64.in_dll(lib, STREAM_SYMBOL)


def stream_threshold() -> int:
    """The destination size in bytes above which a C copy kernel writes with streaming
    (non-temporal) stores; -1: never."""
    return int(_stream_word(load_pool()).value)


def set_stream_threshold(nbytes: int | None) -> int:
    """Set the streaming threshold (`stream_threshold`; None: the default, half the
    last-level cache or `$STRIDEC_STREAM_BYTES`); returns the previous one. Read by every
    kernel call, so it takes effect at the next call, without a rebuild."""
    if nbytes is not None and (type(nbytes) is not int or nbytes < -1):
        raise VerificationError(
            f"set_stream_threshold: expected an int >= -1 (bytes; -1: never) or None; "
            f"got {nbytes!r}"
        )
    word = _stream_word(load_pool())
    previous = int(word.value)
    word.value = default_stream_threshold() if nbytes is None else nbytes
    return previous


_pool_joined = False


@functools.cache
def torch_openmp_entry() -> int | None:
    """The address of `GOMP_parallel` in the OpenMP runtime that torch's own parallel
    loops run on (looked up through torch's extension module, so it is the runtime torch
    loaded, not another copy), or None where torch runs on another backend."""
    try:
        if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
            return None
        mode = getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LAZY", 0)
        ext = ctypes.CDLL(torch._C.__file__, mode=mode)
        return ctypes.cast(ext.GOMP_parallel, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None


def use_torch_openmp(enabled: bool, lib: Any = None) -> bool:
    """Run the kernels' parallel work on torch's OpenMP threads (`enabled`, where torch has
    them) or on the pool's own workers; whether torch's threads are used now. Two pools of
    threads in one process fight for the cores: after each parallel loop torch's threads
    spin for a while, and a worker of another pool then gets a share of a core."""
    entry = torch_openmp_entry() if enabled else None
    getattr(lib or load_pool(), POOL_OPENMP_SYMBOL)(ctypes.c_void_p(entry))
    return entry is not None


def _unit_digest(toolchain: str, source: str) -> str:
    """A unit's key in the disk cache: its files are `<digest>.c`, `<digest>.so`."""
    return hashlib.sha256(f"{toolchain}\n{source}".encode()).hexdigest()[:32]


def unit_key(source: str) -> str:
    """The key of a unit's library in the disk cache: what it depends on, its source, the
    compiler, the flags and the host CPU (measured choice keys its wisdom by it)."""
    return _unit_digest(_toolchain_key(compiler()), source)


def source_files(source: str) -> list[str]:
    """Where the C source of each unit of a kernel's `source` is kept once built (the
    file name is the unit's cache key), for people: nothing is created or built."""
    from stridec.runtime.cache import disk_cache_dir

    toolchain = _toolchain_key(compiler())
    folder = os.path.join(disk_cache_dir(), "kernels", "c")
    return [os.path.join(folder, f"{_unit_digest(toolchain, unit)}.c")
            for unit in (source.split(UNIT_SEPARATOR) if source else [])]


def load_unit(source: str, *, shared: bool = False, extra: tuple[str, ...] = ()) -> Any:
    """The loaded library of one compile unit (built, or read from the disk cache).
    `shared`: its symbols resolve the undefined references of units loaded after it (the
    thread pool's library). A unit calling the pool has the pool loaded first. `extra`:
    compiler flags added to the unit's (its digest covers them)."""
    if POOL_SYMBOL in source and source != POOL_C_SOURCE:
        load_pool()
    mode = ctypes.RTLD_GLOBAL if shared else ctypes.DEFAULT_MODE
    cc = compiler()
    toolchain = _toolchain_key(cc)
    digest = _unit_digest(toolchain, "\n".join((source, *extra)))
    with _lock:
        lib = _units.get(digest)
        if lib is not None:
            _keep_source(source, digest)
            return lib
        folder = _unit_dir()
        source_path = os.path.join(folder, f"{digest}.c")
        lib_path = os.path.join(folder, f"{digest}.so")
        lib = None
        expected = None
        try:
            with open(lib_path + ".sha256", encoding="ascii") as f:
                expected = f.read().strip()
        except OSError:
            pass
        if toolchain and expected and _sha256_file(lib_path) == expected:
            try:
                lib = _dlopen(lib_path, mode)
                BUILD_STATS.disk_loads += 1
                touch(lib_path, lib_path + ".sha256", source_path)
                logger.debug("C unit %s loaded from the disk cache", lib_path)
            except OSError:
                lib = None  # damaged beyond its checksum's reach: rebuilt below
        if lib is None:
            lib = _build_anywhere(cc, source, folder, digest, mode, extra)
        _units[digest] = lib
        return lib


def _keep_source(source: str, digest: str) -> None:
    """A unit loaded before under another cache folder (STRIDEC_CACHE_DIR changed in the
    process) has its source written to this one too, where `Plan.kernel_lines` names it;
    best effort: a folder that takes no writes is left as it is."""
    try:
        path = os.path.join(_unit_dir(), f"{digest}.c")
        if not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
    except OSError:
        pass


# Free bytes a folder must have for a unit's files (its source, objects and library are
# a few MiB at most): below that, a build goes to the private folder.
MIN_FREE_BYTES = 16 << 20
# A temporary file of a build this old is a build that died (killed): removed.
STALE_SECONDS = 3600.0
_warned_folders: set[str] = set()


def _warn_once(folder: str, text: str) -> None:
    if folder not in _warned_folders:
        _warned_folders.add(folder)
        warnings.warn(f"stridec: {text}", RuntimeWarning, stacklevel=4)


def _room(folder: str) -> None:
    """OSError (ENOSPC) where `folder` has less than MIN_FREE_BYTES free."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return  # cannot tell: the writes will
    if st.f_bavail * st.f_frsize < MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"{st.f_bavail * st.f_frsize} bytes free, below "
                      f"{MIN_FREE_BYTES}", folder)


def _full_after(folder: str, failure: BuildError) -> None:
    """OSError (ENOSPC) where a failed compiler run left its folder nearly full (it could
    not write its output), so that the build moves to the private folder."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"the compiler failed with {free} bytes free there",
                      folder) from failure


def _sweep_temporaries(folder: str) -> None:
    """Remove temporary files of builds that died (a process killed mid-build leaves its
    `.tmp-*` files behind): those older than STALE_SECONDS."""
    now = time.time()
    try:
        items = list(os.scandir(folder))
    except OSError:
        return
    for item in items:
        try:
            if item.name.startswith(".tmp-") and now - item.stat().st_mtime > STALE_SECONDS:
                os.remove(item.path)
        except OSError:
            pass


def _build_anywhere(cc: str, source: str, folder: str, digest: str, mode: int,
                    extra: tuple[str, ...] = ()) -> Any:
    """Build and load a unit in `folder`, else -- where the folder cannot take its files
    (full, read-only, over quota) -- in this process's private folder, warned once; a
    `BuildError` saying what to change where neither can."""
    try:
        _sweep_temporaries(folder)
        _room(folder)
        return _build_and_load(cc, source, os.path.join(folder, f"{digest}.c"),
                               os.path.join(folder, f"{digest}.so"), mode, extra)
    except OSError as e:
        first = e
    from stridec.runtime.backends import triton as loader

    where = f"a private folder under {tempfile.gettempdir()!r}"
    try:
        private = os.path.join(loader._private_kernel_dir(), "c")
        where = repr(private)
        if os.path.realpath(private) != os.path.realpath(folder):
            os.makedirs(private, exist_ok=True)
            _room(private)
            lib = _build_and_load(cc, source, os.path.join(private, f"{digest}.c"),
                                  os.path.join(private, f"{digest}.so"), mode, extra)
            _warn_once(folder, f"kernel cache directory {folder!r} is not writable "
                       f"({first}); C kernels are built in {private!r} for this process")
            return lib
        where += " (the same folder)"
    except OSError as e:
        where += f" ({e})"
    raise BuildError(
        f"cpu backend: cannot write the files of a C kernel in {folder!r} ({first}) nor in "
        f"{where}; free space there, "
        "or set STRIDEC_CACHE_DIR (and TMPDIR, where the private folder is) to a writable "
        "folder with room"
    ) from first


def _dlopen(path: str, mode: int) -> Any:
    """The library at `path`, loaded; where the dynamic loader refuses it and loads the
    same bytes from memory (a folder on a `noexec` mount: /tmp and home folders on
    hardened hosts), from memory (`memfd_create`), warned once per folder. The loader's
    OSError where neither loads (a damaged library)."""
    try:
        return ctypes.CDLL(path, mode=mode)
    except OSError as e:
        refused = e
    try:
        lib = _load_from_memory(path, mode)
    except OSError:
        raise refused from None
    _warn_once(os.path.dirname(path), f"the dynamic loader refuses libraries in "
               f"{os.path.dirname(path)!r} ({refused}; a noexec mount?); C kernels are "
               "loaded from memory instead")
    return lib


def _load_from_memory(path: str, mode: int) -> Any:
    """The library at `path` loaded from an anonymous memory file (`memfd_create`, which
    no mount option governs); OSError where there is none or it does not load."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is None:
        raise OSError(errno.ENOSYS, "memfd_create is not available")
    with open(path, "rb") as f:
        data = f.read()
    fd = memfd_create(os.path.basename(path), getattr(os, "MFD_CLOEXEC", 0))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        lib = ctypes.CDLL(f"/proc/self/fd/{fd}", mode=mode)
    except OSError:
        os.close(fd)
        raise
    # The file stays open: the loader knows a library by its name, and a closed fd's
    # number, reused, would name the next library as this one.
    _memory_files.append(fd)
    return lib


_memory_files: list[int] = []


def _build_and_load(cc: str, source: str, source_path: str, lib_path: str, mode: int,
                    extra: tuple[str, ...] = ()) -> Any:
    """Build a unit's library and load it, logged at INFO with its time; again where its
    files vanished meanwhile (another process cleared or trimmed the cache)."""
    for attempt in range(3):
        start = time.perf_counter()
        keep_text(source_path, source)
        # The compiler reads a private copy (`#line` makes its messages name the kept
        # source): a cache entry, the kept file may be cleared while it runs.
        fd, private = tempfile.mkstemp(dir=os.path.dirname(source_path), prefix=".tmp-",
                                       suffix=".c")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(f"#line 1 {json.dumps(source_path)}\n{source}")
            _build(cc, source_path, lib_path, unit_parts(source), compile_from=private,
                   extra=extra)
        except BuildError as e:
            _full_after(os.path.dirname(lib_path), e)
            raise
        finally:
            _remove(private)
        try:
            lib = _dlopen(lib_path, mode)
        except OSError as e:
            if attempt < 2 and not os.path.exists(lib_path):
                continue
            raise BuildError(
                f"cpu backend: the dynamic loader refuses the C kernel just built at "
                f"{lib_path} ({e}), from its folder and from memory; set "
                "STRIDEC_CACHE_DIR to a folder on a filesystem that allows executing "
                f"code; the kernel source is kept at {source_path}"
            ) from e
        seconds = time.perf_counter() - start
        try:
            note_written(os.path.getsize(lib_path) + len(source))
        except OSError:
            pass
        what = source.split("\n", 1)[0].strip("/* ")
        logger.info("built C unit %s in %.2f s (%s)", lib_path, seconds, what)
        return lib
    raise AssertionError("unreachable")


_available: dict[str, bool] = {}


def available() -> bool:
    """Whether C kernels can be built and loaded here: the thread pool's library, which
    every kernel needs first, is the probe (built once, cached on disk)."""
    cc = compiler()
    ok = _available.get(cc)
    if ok is None:
        try:
            ok = load_pool().stridec_probe(41) == 42
        except (BuildError, OSError, AttributeError):
            ok = False
        _available[cc] = ok
    return ok


_SIGNATURE = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_CALLS_SYMBOL = "stridec_calls_module_v1"
_calls: list[Any] = []  # [the module or None], once looked for


def calls_module() -> Any:
    """The builtin function a cached call runs its kernels through, `run(calls, pointers,
    threads)` of `calls.c` (built once with the Python headers, cached as the units are),
    or None where it cannot be built or loaded (no headers, no compiler): the calls then
    go through ctypes. A ctypes call with cold caches costs about 20 µs here, this one
    about 5 (docs/cpu.md, "The call path with cold caches")."""
    if not _calls:
        with _lock:
            if not _calls:
                _calls.append(_load_calls())
    return _calls[0]


def _load_calls() -> Any:
    include = sysconfig.get_paths().get("include")
    if not include or not os.path.exists(os.path.join(include, "Python.h")):
        return None
    source = with_includes(
        (resources.files("stridec.runtime.backends") / "calls.c").read_text("utf-8"))
    source += (f"\n/* for {sys.implementation.cache_tag} "
               f"{sysconfig.get_config_var('EXT_SUFFIX')} {include} */\n")
    try:
        lib = load_unit(source, extra=("-I", include))
        make = ctypes.PYFUNCTYPE(ctypes.py_object)(
            ctypes.cast(getattr(lib, _CALLS_SYMBOL), ctypes.c_void_p).value)
        module = make()
    except (BuildError, OSError, AttributeError) as e:
        logger.info("C kernel calls go through ctypes: %s", e)
        return None
    descriptors = _key_descriptors()
    if descriptors is not None:
        module.setup(torch.Tensor, descriptors)
        _load_fields(module)
        for use in keys_loaded:
            use(module.out_key, module.plain_key)
    return module


_FIELDS_SYMBOL = "stridec_tensor_fields_v1"
# `calls.c`'s `fields` arguments while the TensorImpl reader is on (`_load_fields`).
fields_on: list[tuple[Any, ...]] = []


def _load_fields(module: Any) -> bool:
    """Turn on `calls.c`'s keys read from the tensors' TensorImpls (`tensor_fields.cpp`,
    built once against the installed torch's headers, cached as the units are) where it
    builds, loads and tells apart, on probe tensors of every kind, the calls the getters'
    keys tell apart (`same_calls`) and bumps versions as torch does;
    else the keys stay the getters' (logged). Off with `STRIDEC_TENSOR_FIELDS=0`. Whether
    it turned them on."""
    if os.environ.get("STRIDEC_TENSOR_FIELDS", "1") == "0":
        return False
    root = os.path.dirname(torch.__file__)
    include, libs = os.path.join(root, "include"), os.path.join(root, "lib")
    if not os.path.exists(os.path.join(include, "c10", "core", "TensorImpl.h")):
        logger.info("call keys read through torch's getters: no torch C++ headers")
        return False
    source = with_includes(
        (resources.files("stridec.runtime.backends") / "tensor_fields.cpp").read_text("utf-8"))
    source += f"\n/* for torch {torch.__version__} {torch.version.git_version} {root} */\n"
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    try:
        lib = load_unit(source, extra=(
            "-x", "c++", "-std=c++17", "-w", "-I", include, f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            "-Wl,--no-as-needed", "-L", libs, "-lc10", "-lstdc++", f"-Wl,-rpath,{libs}"))
        reader = ctypes.cast(getattr(lib, _FIELDS_SYMBOL), ctypes.c_void_p).value
        bumper = ctypes.cast(lib.stridec_bump_version_v1, ctypes.c_void_p).value
        scalar_type = lib.stridec_scalar_type_v1
    except (BuildError, OSError, AttributeError) as e:
        logger.info("call keys read through torch's getters: %s", e)
        return False
    scalar_type.argtypes, scalar_type.restype = (ctypes.c_void_p,), ctypes.c_int64
    probes = _field_probes()
    if any(module.impl(t) != t._cdata for t in probes):
        logger.info("call keys read through torch's getters: a tensor's TensorImpl is not "
                    "where calls.c reads it")
        return False
    setup = lib.stridec_tensor_fields_setup_v1
    setup.argtypes, setup.restype = (ctypes.c_void_p,), ctypes.c_int
    if setup(module.impl(probes[0])) != 1:
        logger.info("call keys read through torch's getters: a plain tensor's TensorImpl "
                    "is of a subclass")
        return False
    dtypes: dict[int, torch.dtype] = {}
    for dtype in {d for d in vars(torch).values() if isinstance(d, torch.dtype)}:
        try:
            with warnings.catch_warnings():  # (experimental and deprecated dtypes say so)
                warnings.simplefilter("ignore")
                t = torch.empty(0, dtype=dtype)
        except (RuntimeError, TypeError):
            continue  # (a dtype torch makes no tensor of)
        dtypes[scalar_type(module.impl(t))] = dtype
    dtypes.pop(-1, None)
    getters = _probe_keys(module, probes)
    increment = torch._C._increment_version
    table = tuple(dtypes.get(k) for k in range(max(dtypes, default=-1) + 1))
    module.fields(reader, table, bumper, increment)
    if not (same_calls(_probe_keys(module, probes), getters)
            and all(_bumps(module.bump, t) for t in probes)):
        module.fields(0, None, 0, increment)
        logger.info("call keys read through torch's getters: the TensorImpl reader told "
                    "other calls apart than the getters, or bumped another version")
        return False
    for use in bump_loaded:
        use(module.bump)
    fields_on[:] = [(reader, table, bumper, increment)]
    return True


def _probe_keys(module: Any, probes: Sequence[torch.Tensor]) -> list[Any]:
    """The builtin keys of calls on `probes`: alone, with an out (the last probe), in
    pairs."""
    out = probes[-1]
    keys = []
    for t in probes:
        keys += [module.plain_key((t,)), module.out_key((t,), out), module.out_key((t,), t),
                 module.plain_key((t, probes[0]))]
    return keys


def same_calls(keys: Sequence[Any], others: Sequence[Any]) -> bool:
    """Whether two readings of the same calls' keys (`(key, pointers)` or None each) tell
    the same calls apart: None at the same places, the same pointers, and two keys equal
    in one exactly where they are in the other."""
    if len(keys) != len(others):
        return False
    for a, b in zip(keys, others, strict=True):
        if (a is None) != (b is None) or a is not None and a[1] != b[1]:
            return False
    found = [k[0] for k in keys if k is not None]
    other = [k[0] for k in others if k is not None]
    return all((x == y) == (u == v) for x, u in zip(found, other, strict=True)
               for y, v in zip(found, other, strict=True))


def _bumps(bump: Callable[[tuple[torch.Tensor, ...]], None], t: torch.Tensor) -> bool:
    """Whether `bump` bumps `t`'s version (and its views') by one, as torch does."""
    view = t.view(t.shape)
    before = t._version
    bump((view,))
    return t._version == view._version == before + 1


# Called with `calls.c`'s `bump` once the TensorImpl reader is on (`_load_fields`): what
# bumps the versions of a cached call's outs (`runtime/call_path.py`).
bump_loaded: list[Callable[[Any], None]] = []


def _field_probes() -> list[torch.Tensor]:
    """Tensors of every kind a key reads (`_load_fields`): views, offsets, neg and conj
    bits, grads, a shrunk storage, every dtype."""
    base = torch.randn(6, 8)
    z = torch.complex(torch.randn(2, 3), torch.randn(2, 3))
    shrunk = torch.randn(12)
    view = shrunk[4:10]
    shrunk.untyped_storage().resize_(32)
    probes = [base, base.t(), base[1:, ::2], z.conj(), z.conj().imag, z.imag, view,
              torch.randn(3, requires_grad=True), torch.empty(0), torch.empty(0, 3),
              torch.zeros(2, 3, dtype=torch.bool).expand(4, 2, 3), torch.tensor(1.5)]
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
                  torch.int16, torch.int32, torch.int64, torch.complex128):
        probes.append(torch.ones(2, 3, dtype=dtype)[:, 1:])
    return [*probes, torch.empty(8, 6)]


# Called with the builtin key functions once they are loaded (`runtime/call_path.py`
# reads cached calls' keys with them).
keys_loaded: list[Callable[[Any, Any], None]] = []


# A fresh buffer of the C kernels at least this large is given transparent huge pages
# before they write it (`fresh_buffer`): its first writes fault once per 2 MiB instead of
# once per 4 KiB page (docs/cpu.md, "Fresh buffers"); 0 turns it off.
HUGE_PAGE_BYTES = 8 << 20


def fresh_buffer(nbytes: int) -> Callable[[int], None] | None:
    """The function that asks for huge pages over a fresh buffer of `nbytes` at an
    address (`calls.c`, `huge`), or None where the buffer is small or the builtins did
    not load: called once a call, before the kernels first write the buffer."""
    if not HUGE_PAGE_BYTES or nbytes < HUGE_PAGE_BYTES:
        return None
    module = calls_module()
    if module is None:
        return None
    return functools.partial(_advise, module.huge, nbytes)


def huge_pages() -> tuple[Callable[[int, int], None], int] | None:
    """(`huge(address, nbytes)`, HUGE_PAGE_BYTES): what `fresh_buffer` runs, for a caller
    that learns a buffer's size only at each call (a symbolic program); None where huge
    pages are off or the builtins did not load."""
    if not HUGE_PAGE_BYTES:
        return None
    module = calls_module()
    if module is None:
        return None
    huge = module.huge

    def advise(address: int, nbytes: int) -> None:
        _advise(huge, nbytes, address)
    return advise, HUGE_PAGE_BYTES


def _advise(huge: Callable[[int, int], None], nbytes: int, address: int) -> None:
    huge(address, nbytes)


# What a call key reads of a tensor, in the order `calls.c` takes them (its `setup`), and
# of its untyped storage.
_TENSOR_READS = ("dtype", "shape", "stride", "storage_offset", "is_cpu", "device", "is_neg",
                 "untyped_storage", "requires_grad", "is_conj")
_STORAGE_READS = ("nbytes", "data_ptr")


def _key_descriptors() -> tuple[Any, ...] | None:
    """The descriptors a builtin call key reads (`calls.c`, `setup`), as attribute access
    finds them; None where one is not a C getter or method (a torch whose tensor type
    defines it otherwise: the keys are then read in Python)."""
    kinds = (type(torch.Tensor.dtype), type(torch.Tensor.stride))
    found = [inspect.getattr_static(torch.Tensor, name) for name in _TENSOR_READS]
    found += [inspect.getattr_static(torch.UntypedStorage, name) for name in _STORAGE_READS]
    if any(type(d) not in kinds for d in found):
        return None
    return tuple(found)


# The calls' records (lib/calls_abi.h), as the C reads them: a batch's call, a call of
# calls.c's run(), and the head and calls of calls.c's batch().
_CALLS_ABI = library_text("calls_abi.h")
BATCH_CALL = macro_fields(_CALLS_ABI, "STRIDEC_BATCH_CALL")
RUN_CALL = macro_fields(_CALLS_ABI, "STRIDEC_RUN_CALL")
BATCH_SPEC_HEAD = macro_fields(_CALLS_ABI, "STRIDEC_BATCH_SPEC_HEAD")
BATCH_SPEC_CALL = macro_fields(_CALLS_ABI, "STRIDEC_BATCH_SPEC_CALL")
_BC = {name: k for k, name in enumerate(BATCH_CALL)}


def _record(fields: tuple[str, ...], **values: int) -> list[int]:
    """The words of a record of `fields` (lib/calls_abi.h), each named in `values`."""
    return [values[name] for name in fields]


class _Batch:
    """The calls of a batch (a `cat`) in one parallel region, entered once from Python:
    `stridec_pool_run_batch_v1` sets up each call's job with its class's
    `<symbol>_prepare` in a buffer of this thread, then runs every call's units
    (`<symbol>_work`) on one team. Per call, Python writes the storages' addresses (and a
    symbolic kernel's parameter addresses) into this thread's array of calls."""

    __slots__ = ("prepares", "works", "offsets", "size", "run", "local", "n")

    def __init__(self, libs: list[Any]) -> None:
        prepares, works, self.offsets, at = [], [], [], 0
        for lib, symbol in libs:
            prepares.append(ctypes.cast(getattr(lib, f"{symbol}_prepare"), ctypes.c_void_p).value)
            works.append(ctypes.cast(getattr(lib, f"{symbol}_work"), ctypes.c_void_p).value)
            job_bytes = getattr(lib, f"{symbol}_job_bytes")
            job_bytes.restype = ctypes.c_int64
            self.offsets.append(at)
            at += -(-job_bytes() // 64) * 64
        self.n = len(libs)
        self.size = at
        self.prepares = (ctypes.c_void_p * self.n)(*prepares)
        self.works = (ctypes.c_void_p * self.n)(*works)
        run = getattr(load_pool(), POOL_BATCH_SYMBOL)
        run.argtypes = (ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.c_void_p, ctypes.c_int64)
        run.restype = None
        self.run = run
        self.local = threading.local()

    def calls(self, addresses: list[int | None]) -> tuple[Any, int, int, Any]:
        """This thread's array of calls (a record of `BATCH_CALL` a call; the static
        parameters' addresses filled in), its address, that of the jobs' addresses, and
        the memory they live in (`local.held`, made on a thread's first call)."""
        held = getattr(self.local, "held", None)
        if held is None:
            raw = ctypes.create_string_buffer(self.size + 64)
            base = -(-ctypes.addressof(raw) // 64) * 64
            jobs = (ctypes.c_void_p * self.n)(*[base + at for at in self.offsets])
            calls = (ctypes.c_int64 * (len(BATCH_CALL) * self.n))()
            for k, address in enumerate(addresses):
                calls[len(BATCH_CALL) * k + _BC["params"]] = address or 0
            held = self.local.held = (calls, ctypes.addressof(calls), ctypes.addressof(jobs),
                                      (raw, jobs))
        return held


class CpuKernel:
    """A launcher of a C kernel: `launcher(grid, *storages)` makes each of its calls (see
    `CCopyKernel.calls`) on `torch.get_num_threads()` threads; the grid and the launch
    keywords of the Triton kernels are ignored. A kernel over symbolic sizes (parameters
    that are expressions) is loaded once and launched with `params=`, one int64 array
    (an `array.array("q")`: `launch.SymbolicRunner`) holding this binding's parameters of
    every call, one call's after another's; each call reads its own at a byte offset."""

    __slots__ = ("name", "_calls", "_arrays", "_offsets", "_batch", "_checks")
    # Reads each storage's `data_ptr()` only: a runner may pass untyped storages.
    pointers_only = True

    def __init__(self, name: str, source: str, calls: Any) -> None:
        units = source.split(UNIT_SEPARATOR) if source else []
        functions: dict[str, Any] = {}
        libs: dict[str, Any] = {}
        for unit in units:
            lib = load_unit(unit)
            for symbol, *_ in calls:
                if symbol not in functions and hasattr(lib, symbol):
                    fn = getattr(lib, symbol)
                    fn.argtypes = _SIGNATURE
                    fn.restype = None
                    functions[symbol] = fn
                    libs[symbol] = lib
        # A batch's calls run in one parallel region where every class has the entry
        # points (the copy classes; Philox units run call by call).
        self._batch = None
        if len(calls) > 1 and all(hasattr(libs[sym], f"{sym}_prepare") for sym, *_ in calls):
            self._batch = _Batch([(libs[sym], sym) for sym, *_ in calls])
        self.name = name
        self._arrays = []
        self._checks = tuple(_checker(libs[symbol], symbol) for symbol, *_ in calls)
        resolved = []
        offsets, at = [], 0
        for (symbol, src_arg, dst_arg, params), check in zip(calls, self._checks, strict=True):
            offsets.append(at)
            at += 8 * len(params)
            address = None
            if all(type(p) is int for p in params):
                array = (ctypes.c_int64 * len(params))(*params)
                self._arrays.append(array)  # kept alive with the kernel
                address = ctypes.addressof(array)
                _check_block(name, check, address)
            resolved.append((functions[symbol], int(src_arg), int(dst_arg), address))
        self._calls = tuple(resolved)
        self._offsets = tuple(offsets)

    def __call__(self, grid: Any, *storages: torch.Tensor, params: Any = None,
                 **_: Any) -> None:
        threads = torch.get_num_threads()
        if self._batch is not None:
            self._run_batch(storages, params, threads)
            return
        if params is not None:
            base = params.buffer_info()[0]
            for (fn, src_arg, dst_arg, _static), at in zip(self._calls, self._offsets,
                                                          strict=True):
                fn(storages[src_arg].data_ptr(), storages[dst_arg].data_ptr(), base + at,
                   threads)
            return
        for fn, src_arg, dst_arg, address in self._calls:
            if address is None:
                raise _symbolic(self.name)
            fn(storages[src_arg].data_ptr(), storages[dst_arg].data_ptr(), address, threads)

    def bound(self, slots: Sequence[int], params: Any = None
              ) -> Callable[[Sequence[int], int], None] | None:
        """This kernel's calls as one function of a list of data pointers and the thread
        count, where storage argument `k` is `pointers[slots[k]]`: a cached call runs it
        with the pointers its call key read, and builds no storage objects. A kernel over
        symbolic sizes takes one binding's parameters (`params`, as `__call__` does; the
        function keeps the array alive); None without them."""
        if params is not None:
            base = params.buffer_info()[0]
            addresses = [base + at for at in self._offsets]
            for check, address in zip(self._checks, addresses, strict=True):
                _check_block(self.name, check, address)  # this binding's blocks, once
        else:
            addresses = [c[3] for c in self._calls]
            if None in addresses:
                return None
        batch = self._batch
        if batch is None:
            calls = tuple((fn, slots[src], slots[dst], address)
                          for (fn, src, dst, _), address in zip(self._calls, addresses,
                                                                strict=True))
            fast = calls_module()
            if fast is not None:
                fast = fast.run  # one builtin call, no ctypes (`calls_module`)
                packed = array.array("q", [v for fn, src, dst, address in calls for v in _record(
                    RUN_CALL, entry=ctypes.cast(fn, ctypes.c_void_p).value, src_slot=src,
                    dst_slot=dst, params=address)]).tobytes()
                bound = functools.partial(fast, packed)
                bound.params = params  # type: ignore[attr-defined]  # (held: its memory is read)
                return bound

            def run(pointers: Sequence[int], threads: int) -> None:
                for fn, src, dst, address in calls:
                    fn(pointers[src], pointers[dst], address, threads)
            run.params = params  # type: ignore[attr-defined]  # (held: its memory is read)
            return run
        fast = calls_module()
        if fast is not None:  # the calls and jobs on the builtin's stack (`calls_module`)
            head = _record(BATCH_SPEC_HEAD, entry=ctypes.cast(batch.run, ctypes.c_void_p).value,
                           calls=batch.n, prepares=ctypes.addressof(batch.prepares),
                           works=ctypes.addressof(batch.works), job_bytes=batch.size)
            packed = array.array("q", head + [v for (_fn, src, dst, _a), address, at in zip(
                self._calls, addresses, batch.offsets, strict=True) for v in _record(
                    BATCH_SPEC_CALL, src_slot=slots[src], dst_slot=slots[dst], params=address,
                    job_offset=at)]).tobytes()
            bound = functools.partial(fast.batch, packed)
            bound.params = params  # type: ignore[attr-defined]
            bound.batch = batch  # type: ignore[attr-defined]  # (its arrays are read)
            return bound
        # A thread's array of calls is shared by every binding of the kernel: a symbolic
        # one writes its parameters' addresses on each call.
        width, at_src, at_dst, at_params = (len(BATCH_CALL), _BC["src"], _BC["dst"],
                                            _BC["params"])
        pairs = tuple((width * k, slots[src], slots[dst], addresses[k] if params is not None
                       else None) for k, (_fn, src, dst, _a) in enumerate(self._calls))
        prepares, works = ctypes.addressof(batch.prepares), ctypes.addressof(batch.works)
        local, run, n = batch.local, batch.run, batch.n

        def run_batch(pointers: Sequence[int], threads: int) -> None:
            try:  # this thread's arrays, read inline (with cold caches a call costs)
                calls, calls_at, jobs_at, _ = local.held
            except AttributeError:  # the thread's first call
                calls, calls_at, jobs_at, _ = batch.calls(addresses)
            for k, src, dst, address in pairs:
                calls[k + at_src] = pointers[src]
                calls[k + at_dst] = pointers[dst]
                if address is not None:
                    calls[k + at_params] = address
            run(n, prepares, works, calls_at, jobs_at, threads)
        run_batch.params = params  # type: ignore[attr-defined]
        return run_batch

    def _run_batch(self, storages: Any, params: Any, threads: int) -> None:
        batch = self._batch
        calls, calls_at, jobs_at, _ = batch.calls([c[3] for c in self._calls])
        base = None if params is None else params.buffer_info()[0]
        k = 0
        for (_fn, src_arg, dst_arg, address), at in zip(self._calls, self._offsets,
                                                       strict=True):
            calls[k + _BC["src"]] = storages[src_arg].data_ptr()
            calls[k + _BC["dst"]] = storages[dst_arg].data_ptr()
            if base is not None:
                calls[k + _BC["params"]] = base + at
            elif address is None:
                raise _symbolic(self.name)
            k += len(BATCH_CALL)
        batch.run(batch.n, ctypes.addressof(batch.prepares), ctypes.addressof(batch.works),
                  calls_at, jobs_at, threads)


def _checker(lib: Any, symbol: str) -> Any:
    """A copy class's `<symbol>_check` (1 where its library reads an argument block), or
    None for a class without one (Philox)."""
    check = getattr(lib, f"{symbol}_check", None)
    if check is not None:
        check.argtypes = (ctypes.c_void_p,)
        check.restype = ctypes.c_int64
    return check


def _check_block(name: str, check: Any, address: int) -> None:
    """Raise where a copy class's library would refuse the argument block at `address`
    (it then moves nothing): a plan the planner made that the library does not read is a
    bug, found as the kernel loads (or a symbolic one binds), not an output left as it was."""
    if check is not None and not check(address):
        raise InternalError(f"bug in stridec: kernel {name}: its library refuses the "
                            f"argument block at {address:#x} (its plan moves nothing)")


def _symbolic(name: str) -> CallError:
    return CallError(f"kernel {name}: its parameters are symbolic; expected params= with "
                     "this binding's (a SymbolicRunner launches it)")


def load_c_kernel(name: str, source: str, calls: Any) -> CpuKernel:
    return CpuKernel(name, source, calls)


class CpuBackend:
    """Native kernels for CPU tensors: every kernel of a program lowered for the "c"
    target is C (copies: `codegen/c/copy.py`, Philox: `codegen/c/philox.py`)."""

    name = "cpu"
    language = "c"
    device = "cpu"

    def load(self, program: Program) -> list[CpuKernel]:
        return [self.load_kernel(k) for k in program.kernels]

    def load_kernel(self, kernel: Any) -> CpuKernel:
        return load_c_kernel(kernel.name, kernel.source, kernel.calls)

    def call_form(self, kernel: KernelInfo) -> CallForm:
        # Every call's parameters, one after another, in one int64 array (`CpuKernel`);
        # the grid and the Triton keywords do not apply.
        return CallForm((), (), {}, {"params": tuple(n for c in kernel.calls for n in c[3])})


BACKEND = CpuBackend()
