"""Two-stage verification: structural checks for every op, then the op's own `verify_`.

`verify_graph(graph)` checks everything. `verify_graph(graph, incremental=True)`, which
the pass manager runs after every pass, gives the same verdict at a cost that follows
what changed: structure is checked in full each time (linear: a few set and list look-ups
per operand and use), while the costly part -- re-normalizing the attributes,
re-inferring the result types, running the `verify_` hook -- is skipped where its inputs
are those it already passed with. Nothing has to report a mutation, so nothing can forget
to: the inputs themselves are compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import is_
from typing import TYPE_CHECKING, Any

from stridec.errors import StridecError, VerificationError
from stridec.ir.dtypes import DType
from stridec.ir.layout import Layout
from stridec.ir.types import TensorType

if TYPE_CHECKING:  # the core (`stridec.ir.graph`) calls this module: types only
    from stridec.ir.graph import Graph, Op, Value

__all__ = ["verify_graph"]

#: A value's use list is scanned for an operand while it is this short; a longer one is
#: made a set once per verification, so a value read n times costs n look-ups, not n².
_SCAN_USES = 8

#: Attribute value types that cannot change once built: an op whose attribute values are
#: all of these (or tuples of them) may be stamped, since the same objects then mean the
#: same contents. An op holding anything else (a list) is checked in full every time.
_IMMUTABLE = frozenset({int, float, bool, str, type(None), Layout, DType, TensorType})


def verify_graph(graph: Graph, incremental: bool = False) -> None:
    """Raise `VerificationError` naming the op (by position and name) and the operand at fault.

    Structure: every operand is defined earlier in the same graph; use lists agree with
    operands, both ways; input names are unique; `output`, if present, is the last op and
    appears once; each op has as many operands as it takes. In depth: attributes valid
    for the operands, stored result types equal to what the op infers from its operands
    and attributes, then the op's `verify_` hook.

    With `incremental`, every op still gets the structural checks, and the in-depth ones
    unless their inputs are provably those of an earlier success:

    - an op that passed them is stamped (`Op.verified_as`) with a fingerprint: its class,
      attribute names and values, operand and result types, and -- for an op with a
      `verify_` hook -- each operand's root storage value and that root's type (what the
      hooks of `as_strided` and the explicit copies read). When all of it is unchanged, the
      op is not checked again; when only the roots moved, only the hook runs;
    - an op whose constructor inferred its result types (`Op.inferred_from`) from the
      attributes and operand types it still has, and which still holds those result
      types, is not re-normalized or re-inferred; its hook runs.

    Attribute values are compared by identity (an attribute 1 replaced by True is a
    change, though 1 == True), types by value as the full check compares them. So a pass
    that creates an op with a wrong result type (given, or assigned later), assigns new
    attributes, redirects an operand, swaps an op's class or re-roots a view chain is
    caught as by the full check, with the same error. What is trusted: `normalize` and
    `infer_types` depend only on the attributes and operand types; `normalize` accepts
    its own output (an op built by its constructor is not re-normalized); hooks read
    only what the fingerprint holds; frozen values (types, layouts, dtypes) are not
    mutated behind `frozen=True` with `object.__setattr__`. An op with an attribute value
    that could change in place (a list) is never stamped: it is checked in full each time.
    """
    _verify(graph, incremental)


def _verify(graph: Graph, incremental: bool) -> None:
    """One forward sweep, O(1) work per operand and per use besides the in-depth checks."""
    defined: set[int] = set()
    roots: dict[int, Value] = {}  # value id -> its root storage value, as far as walked
    use_sets: dict[int, set[tuple[Op, int]]] = {}
    input_names: set[str] = set()
    # Root versions an op has written over in place (value id -> its position): no later
    # op may read them, or views of them (it would read the new contents, not the SSA
    # value's).
    overwritten: dict[int, int] = {}
    ops = graph.ops
    last = len(ops) - 1
    for position, op in enumerate(ops):
        if op.graph is not graph:
            raise VerificationError(f"{_where(position, op)}: is not owned by graph {graph.name!r}")
        operands = op.operands
        for i, v in enumerate(operands):
            if id(v) not in defined:
                raise VerificationError(
                    f"{_where(position, op)}: operand {i} is not defined before its use "
                    f"(by '{v.owner.name}')"
                )
            uses = v.uses
            if len(uses) > _SCAN_USES:
                found = use_sets.get(id(v))
                if found is None:
                    found = use_sets[id(v)] = set(uses)
                uses = found  # type: ignore[assignment]
            if (op, i) not in uses:
                raise VerificationError(
                    f"{_where(position, op)}: operand {i} is missing from its use list"
                )
        if op.num_operands is not None and len(operands) != op.num_operands:
            raise VerificationError(
                f"{_where(position, op)}: expected {op.num_operands} operand(s); "
                f"got {len(operands)}"
            )
        if op.is_terminator and position != last:
            raise VerificationError(f"{_where(position, op)}: 'output' must be the last op")
        if op.is_argument:
            input_name = op.arg_name
            if input_name in input_names:
                raise VerificationError(
                    f"{_where(position, op)}: input name {input_name!r} is used twice"
                )
            input_names.add(input_name)
        if overwritten:
            for i, v in enumerate(operands):
                written = overwritten.get(id(_root(v, roots)))
                if written is not None:
                    raise VerificationError(
                        f"{_where(position, op)}: operand {i} reads memory that "
                        f"{_where(written, ops[written])} wrote over in place; read the "
                        "value that write returned (the memory after it)"
                    )
        if incremental:
            _check_op_again(position, op, roots)
        else:
            _check_op(position, op, inferred=False)
        written_root = op.written_root()
        if written_root is not None:
            overwritten[id(_root(written_root, roots))] = position
        for r in op.results:
            for user, i in r.uses:
                if user.graph is not graph or i >= len(user.operands) or user.operands[i] is not r:
                    raise VerificationError(
                        f"{_where(position, op)}: result {r.index} lists a use by "
                        f"'{user.name}' (operand {i}) that is not in the graph or does not "
                        "read it"
                    )
            defined.add(id(r))


def _where(position: int, op: Op) -> str:
    return f"op #{position} '{op.name}'"


def _check_op(position: int, op: Op, inferred: bool) -> None:
    """The in-depth checks: the attributes still fit the operands and the stored result
    types are the inferred ones (unless the constructor's inference still holds,
    `inferred`), then the op's own `verify_` hook."""
    if not inferred and not op.is_argument:
        types = [v.type for v in op.operands]
        try:
            op.normalize(dict(op.attrs), types)
            inferred_types = op.infer_types(types)
        except StridecError as e:
            raise VerificationError(f"{_where(position, op)}: {e}") from e
        stored = [r.type for r in op.results]
        if list(inferred_types) != stored:
            raise VerificationError(
                f"{_where(position, op)}: result types {[str(t) for t in stored]} differ from "
                f"the inferred {[str(t) for t in inferred_types]}"
            )
    try:
        op.verify_()
    except StridecError as e:
        raise VerificationError(f"{_where(position, op)}: {e}") from e


def _check_op_again(position: int, op: Op, roots: dict[int, Value]) -> None:
    """`_check_op`, less what the op's stamp or its constructor already covers; stamp it.

    The stamp is the op's `inference_record` as it is now, followed -- for an op with a
    `verify_` hook -- by each operand's root storage value and that root's type.
    """
    kind = type(op)
    attrs = op.attrs
    operands = op.operands
    results = op.results
    # `inference_record(op, ...)`, built in place: this runs for every op after every pass.
    fingerprint: list[Any] = [kind, len(attrs), len(operands), len(results)]
    fingerprint += attrs
    fingerprint += attrs.values()
    refs_end = len(fingerprint)
    fingerprint += [v.type for v in operands]
    fingerprint += [r.type for r in results]
    types_end = len(fingerprint)
    if kind.has_verify_hook:  # the base hook checks nothing: roots need not be watched
        for v in operands:
            root = roots.get(id(v))
            if root is None:  # (not `or`: a value's truth is its length, as a tensor's)
                root = _root(v, roots)
            fingerprint += (root, root.type)
    stamp = op.verified_as
    if stamp is not None and len(stamp) == len(fingerprint) and all(map(is_, stamp, fingerprint)):
        return
    if stamp is not None and _typed_as(stamp, fingerprint, refs_end, types_end):
        inferred = True  # attributes and types passed before: only the hook's input moved
    else:
        made = op.inferred_from
        inferred = (
            made is not None
            and len(made) == types_end
            # the very objects the constructor read and gave (the usual case), else equal
            and (all(map(is_, made, fingerprint)) or _typed_as(made, fingerprint, refs_end,
                                                               types_end))
        )
    _check_op(position, op, inferred)
    op.verified_as = tuple(fingerprint) if _all_immutable(attrs.values()) else None


def _typed_as(before: Sequence[Any], now: list[Any], refs_end: int, types_end: int) -> bool:
    """Whether `before` starts with the same references as `now[:refs_end]` (class,
    counts, attribute names and values) and then equal types up to `types_end`: the same
    objects, or equal `TensorType`s, as `_check_op` compares types (a rebuilt operand of
    the same type is no change to its reader)."""
    if len(before) < types_end or not all(map(is_, before[:refs_end], now[:refs_end])):
        return False
    then, types = tuple(before[refs_end:types_end]), tuple(now[refs_end:types_end])
    if all(map(is_, then, types)):
        return True
    return all(type(t) is TensorType for t in (*then, *types)) and then == types


def _root(v: Value, roots: dict[int, Value]) -> Value:
    """`v.root()`, memoized for one sweep: each view value is walked past once."""
    walked: list[Value] = []
    while True:
        known = roots.get(id(v))
        if known is not None:
            v = known
            break
        owner = v.owner
        if not (owner.operands and owner.aliases_operand()):
            break
        walked.append(v)
        v = owner.operands[0]
    for w in walked:
        roots[id(w)] = v
    roots[id(v)] = v
    return v


def _all_immutable(values: Iterable[Any]) -> bool:
    """Whether every value is of an `_IMMUTABLE` type or a tuple of such (nested)."""
    for value in values:
        if type(value) not in _IMMUTABLE and not _immutable(value):
            return False
    return True


def _immutable(value: Any) -> bool:
    kind = type(value)
    if kind is tuple:
        return _all_immutable(value)
    return kind in _IMMUTABLE
