"""`python -m stridec cache`: the disk cache of plans and kernels, seen and emptied.

    python -m stridec cache info             # where it is, what it holds, its cap
    python -m stridec cache clear            # remove every entry
    python -m stridec cache trim [--to SIZE] # least recently used entries out, to SIZE

The cache is `$STRIDEC_CACHE_DIR` (default `$XDG_CACHE_HOME/stridec` or
`~/.cache/stridec`); its cap is `$STRIDEC_CACHE_MAX_SIZE` (default 1 GiB), kept by every
process that writes into it (`stridec.runtime.cache.trim`). Torch is not imported.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from stridec.runtime import cache

__all__ = ["main"]

KINDS = (("plan", "plans"), ("wisdom", "measured plan choices"),
         ("triton", "Triton kernel modules"), ("c", "C units (.c, .so)"))


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line exits with status 1, as stridec-opt's does."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m stridec cache", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="{info,clear,trim}")
    sub.add_parser("info", help="where the cache is, what it holds and its cap")
    sub.add_parser("clear", help="remove every entry (the folders stay)")
    trim = sub.add_parser("trim", help="remove least recently used entries down to a size")
    trim.add_argument("--to", metavar="SIZE", default=None,
                      help="bytes, or a number with K, M, G (default: nine tenths of the cap)")
    return p


def info() -> str:
    """The cache's folder, its entries and bytes by kind, and its cap, as text."""
    folder = cache.disk_cache_dir()
    chosen = "STRIDEC_CACHE_DIR" if os.environ.get("STRIDEC_CACHE_DIR") else "default"
    entries = cache.disk_entries()
    cap = cache.max_size()
    lines = [f"stridec cache: {folder} ({chosen})"]
    for kind, label in KINDS:
        mine = [e for e in entries if e.kind == kind]
        size = cache.format_bytes(sum(e.size for e in mine))
        lines.append(f"  {label:<24} {len(mine):>6}  {size:>10}")
    total = sum(e.size for e in entries)
    limit = "no cap" if cap is None else f"cap {cache.format_bytes(cap)}"
    source = "STRIDEC_CACHE_MAX_SIZE" if os.environ.get("STRIDEC_CACHE_MAX_SIZE") else "default"
    lines.append(f"  {'total':<24} {len(entries):>6}  {cache.format_bytes(total):>10}"
                 f"  ({limit}, {source}; least recently used entries go first)")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        limit = None
        if args.command == "trim" and args.to is not None:
            try:
                limit = cache.parse_size(args.to)
            except ValueError:
                limit = None
            if limit is None:
                parser.error(f"--to: expected a size (bytes, or with K, M, G); got {args.to!r}")
    except SystemExit as e:  # --help (0) or a bad command line (1)
        return e.code if isinstance(e.code, int) else 1
    if args.command == "info":
        sys.stdout.write(info())
    elif args.command == "clear":
        count, freed = cache.clear()
        print(f"removed {count} entries ({cache.format_bytes(freed)}) from "
              f"{cache.disk_cache_dir()}")
    else:
        if limit is None and cache.max_size() is None:
            print("the cache has no cap (STRIDEC_CACHE_MAX_SIZE=unlimited): nothing to trim")
            return 0
        count, freed = cache.trim(limit, grace=0)
        print(f"removed {count} entries ({cache.format_bytes(freed)}) from "
              f"{cache.disk_cache_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
