"""The compiler's passes, one per module; importing this package registers them all."""

from stridec.compiler.passes import (  # noqa: F401
    canonicalize,
    cse,
    dce,
    eliminate_copies,
    fold_views,
    fuse_copies,
    lower_formats,
    merge_fills,
    plan_memory,
)
