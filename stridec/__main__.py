"""`python -m stridec cache info|clear|trim`: the disk cache (`stridec.tools.cache`)."""

from __future__ import annotations

import sys

from stridec.tools import cache


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "cache":
        print("usage: python -m stridec cache {info,clear,trim} (stridec-opt compiles text IR)",
              file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 1
    return cache.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
