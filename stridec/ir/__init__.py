"""The IR: layouts, formats, dtypes, ops, graphs, the verifier, the text form and the builder.

The core (`graph`: ops, values, graphs) knows nothing of the torch-like builder on top of
it; the builder adds its methods to `Graph` and `Value` when it loads, so the package
loads it before anything else of the IR is used.
"""

from stridec.ir import builder as _builder  # noqa: F401  (adds the builder surface)
