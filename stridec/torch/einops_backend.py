"""einops on traced tensors, with no backend for the user to write.

einops picks a backend by the tensor's type (`einops._backends.get_backend`): it tries
every subclass of its `AbstractBackend` whose `framework_name` is an imported module.
`ProxyBackend` is einops' own torch backend taking `stridec.torch.trace.Proxy`: every
step einops takes (`reshape`, `permute`, `expand`, `repeat`, `torch.cat`, `torch.stack`,
`torch.einsum`, slicing for `unpack`) is then a traced layout op. Reductions are values,
not layouts: `reduce` traces only where every reduced axis has length 1 and the result is
that element (`min`, `max`; `prod` of floats), and refuses otherwise.

`stridec.trace` calls `register()`; stridec never imports einops on import.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from typing import Any

__all__ = ["register"]

# einops finds backends through `__subclasses__()`, which holds them weakly: kept here.
_BACKENDS: list[type] = []


@functools.cache
def register() -> bool:
    """Define `ProxyBackend` (a subclass is all einops needs to find it) if einops is
    installed; whether it is."""
    if importlib.util.find_spec("einops") is None:
        return False
    from einops._backends import TorchBackend

    trace_module = importlib.import_module("stridec.torch.trace")  # the module, not trace()

    class ProxyBackend(TorchBackend):  # type: ignore[misc]
        # einops instantiates a backend once its framework's module is imported: this one
        # is, whenever a traced tensor exists.
        framework_name = trace_module.__name__

        def is_appropriate_type(self, tensor: Any) -> bool:
            return isinstance(tensor, trace_module.Proxy)

        def reduce(self, x: Any, operation: str, reduced_axes: Any) -> Any:
            return trace_module.einops_reduce(x, operation, tuple(reduced_axes))

    ProxyBackend.__qualname__ = ProxyBackend.__name__ = "ProxyBackend"
    _BACKENDS.append(ProxyBackend)
    return True
