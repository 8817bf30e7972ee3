"""The code-generation targets by name (`codegen.target` says what a target is):

>>> sorted(t.name for t in targets())
['c', 'cpu', 'cuda']
>>> target("c").language, target("c").backend, target("cuda").backend
('c', 'cpu', 'triton')
>>> target_of_backend("interpret").name
'cpu'

A new target is a module with a `Target` subclass, named in `BUILTIN` here, or added at
run time with `register_target` (docs/adding-a-target.md).
"""

from __future__ import annotations

from stridec.compiler.codegen.c.target import CTarget
from stridec.compiler.codegen.target import Target
from stridec.compiler.codegen.triton_target import TritonInterpreterTarget, TritonTarget
from stridec.errors import UnsupportedError

__all__ = ["BUILTIN", "register_target", "target", "target_of_backend", "targets"]

#: The targets that come with stridec.
BUILTIN: tuple[Target, ...] = (TritonTarget(), TritonInterpreterTarget(), CTarget())

_TARGETS: dict[str, Target] = {t.name: t for t in BUILTIN}


def register_target(t: Target) -> Target:
    """Make `t` the target called `t.name` (replacing any of that name) and return it."""
    if not isinstance(t, Target):
        raise UnsupportedError(
            f"register_target: expected a Target; got {type(t).__name__}")
    _TARGETS[t.name] = t
    return t


def target(name: str | Target) -> Target:
    """The target called `name` (a `Target` is returned as it is)."""
    if isinstance(name, Target):
        return name
    found = _TARGETS.get(name)
    if found is None:
        raise UnsupportedError(
            f"no code-generation target {name!r}; expected one of "
            f"{', '.join(repr(n) for n in sorted(_TARGETS))}"
        )
    return found


def targets() -> list[Target]:
    """Every registered target, the built-in ones first."""
    return list(_TARGETS.values())


def target_of_backend(backend: str) -> Target:
    """The target whose kernels the runtime's kernel backend `backend` runs."""
    for t in _TARGETS.values():
        if t.backend == backend:
            return t
    raise UnsupportedError(
        f"no code-generation target runs on backend {backend!r}; expected one of "
        f"{', '.join(repr(t.backend) for t in _TARGETS.values())}"
    )
