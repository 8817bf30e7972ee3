"""The IR core: `Graph` owns an ordered list of `Op`s; each op has operand and result `Value`s.

Op classes live in `stridec.ir.ops`; this module holds the structure they share: use
lists (so replacing a value is proportional to its uses), the op registry used by the
parser, and the entry points of the text form (`stridec.ir.printer`) and of two-stage
verification (`stridec.ir.verifier`: structural checks, then each op's `verify_` hook),
which read a graph through this structure alone. The torch-like builder methods of
`Value` and `Graph` (`x.permute(...)`, `g.input(...)`) sit on top of this core:
`stridec.ir.builder` adds them when it loads, and the `stridec.ir` package loads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

from stridec.errors import VerificationError
from stridec.ir import display
from stridec.ir.attributes import Attr
from stridec.ir.layout import Layout
from stridec.ir.printer import print_graph
from stridec.ir.symbols import Sym, free_symbols, substitute
from stridec.ir.types import TensorType
from stridec.ir.verifier import verify_graph

__all__ = ["Value", "Op", "Graph", "OP_REGISTRY", "register_op"]

OP_REGISTRY: dict[str, type[Op]] = {}


def register_op(cls: type[Op]) -> type[Op]:
    """Class decorator: make an op known to the parser by its text name."""
    OP_REGISTRY[cls.name] = cls
    return cls


def inference_record(
    op: Op, operand_types: Sequence[TensorType], result_types: Sequence[TensorType]
) -> tuple:
    """What result-type inference read and what it gave, flat, for `stridec.ir.verifier`
    to compare: the class, counts that fix where each part starts, the attribute names
    and values (compared by identity), then the types (compared by value, as the verifier
    compares types):

        (type(op), len(attrs), len(operand_types), len(result_types),
         *attribute names, *attribute values, *operand_types, *result_types)
    """
    attrs = op.attrs
    return (
        type(op),
        len(attrs),
        len(operand_types),
        len(result_types),
        *attrs,
        *attrs.values(),
        *operand_types,
        *result_types,
    )


class Op:
    """Base of every op. Subclasses set `name`, declare their attributes with
    `stridec.ir.attributes.attr` (`dims = attr(ints)`: the attribute, its canonical form,
    its place in the text and the accessor `op.dims`, declared once) and override the hooks
    below.

    Hooks (classmethods or methods a subclass overrides):
    - `relate_attrs(attrs, operand_types)` checks what ties the converted attributes to
      each other and to the operand types, and may complete them (a default taken from
      an operand), raising a `StridecError` naming the op and attribute;
    - `infer_types(operand_types)` returns the result types;
    - `verify_()` checks what normalization cannot (operand counts, dtypes); it may read
      the op's attributes and types and its operands' root storage (`Value.root`): the
      verification after each pass runs it again when one of those changed;
    An op's meaning in plain torch lives with the reference backend
    (`stridec.runtime.backends.reference.RULES`) and its adjoint with autograd
    (`stridec.torch.adjoint.ADJOINTS`), each registered there by op class: the IR needs
    no torch (docs/adding-an-op.md).

    Two records let the verification after each pass (`verify_graph(graph,
    incremental=True)` in `stridec.ir.verifier`) skip work whose inputs did not change:
    - `inferred_from`: the `inference_record` of the construction when the constructor
      inferred the result types (None when they were given);
    - `verified_as`: the fingerprint of the last in-depth verification the op passed
      there (None before any). Only the verifier writes it.

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> op = x.transpose(0, 1).owner
    >>> op.name, op.dim0, op.dim1, [str(r.type) for r in op.results]
    ('transpose', 0, 1, ['tensor<3x2x4xf32, strided<[4, 12, 1], offset: 0>>'])
    """

    name: ClassVar[str] = "op"
    #: The declared attributes: the class's own in declaration order, then its base's
    #: (a shared tail, as the placement of the philox ops). Set by `__init_subclass__`.
    attr_defs: ClassVar[tuple[Attr, ...]] = ()
    #: Their names, in text order.
    attr_names: ClassVar[tuple[str, ...]] = ()
    #: The names the text gives in the attribute dict (not by the result type).
    text_attr_names: ClassVar[tuple[str, ...]] = ()
    #: The names the parser reads after this op's name: `text_attr_names`, unless the
    #: name stands for several classes (`text_form`).
    parsed_attr_names: ClassVar[tuple[str, ...]] = ()
    #: True when every result is a view of operand 0 (zero-copy, no new storage).
    is_view: ClassVar[bool] = False
    #: The graph's boundary, as MLIR's block arguments and terminator: `input` is an
    #: argument (its result is one of `Graph.inputs`), `output` the terminator.
    is_argument: ClassVar[bool] = False
    is_terminator: ClassVar[bool] = False
    #: Whether the class has a `verify_` hook of its own (set by `__init_subclass__`): the
    #: verifier watches operand roots only for ops with one.
    has_verify_hook: ClassVar[bool] = False
    #: The builder names that make this op (docs/adding-an-op.md): `Tensor.<name>` is the
    #: `Value` method mirroring torch's (`stridec.ir.builder.SURFACE`), `torch.<name>` the
    #: builder function mirroring torch's (`builder.FUNCTIONS`), `Graph.<name>` and
    #: `Value.<name>` stridec's own. Every op class declares its own.
    surface: ClassVar[tuple[str, ...]] = ()
    #: Operand count: an int, or None for variadic.
    num_operands: ClassVar[int | None] = 1

    __slots__ = (
        "operands",
        "attrs",
        "results",
        "graph",
        "inferred_from",
        "verified_as",
        "__weakref__",
    )

    def __init__(
        self,
        operands: Sequence[Value] = (),
        attrs: Mapping[str, Any] | None = None,
        result_types: Sequence[TensorType] | None = None,
    ) -> None:
        self.graph: Graph | None = None
        self.operands: list[Value] = []
        for v in operands:
            if not isinstance(v, Value):
                raise VerificationError(
                    f"{self.name}: expected stridec Values as operands; got {type(v).__name__}"
                )
        if self.num_operands is not None and len(operands) != self.num_operands:
            raise VerificationError(
                f"{self.name}: expected {self.num_operands} operand(s); got {len(operands)}"
            )
        operand_types = [v.type for v in operands]
        attrs = dict(attrs or {})
        unknown = set(attrs) - set(self.attr_names)
        if unknown:
            # Checked before `normalize`, which builds a fresh dict and would drop them.
            raise VerificationError(
                f"{self.name}: unknown attribute(s) {sorted(unknown)}; expected "
                f"{list(self.attr_names) or 'none'}"
            )
        normalized = self.normalize(attrs, operand_types)
        self.attrs: Mapping[str, Any] = MappingProxyType(normalized)
        self.inferred_from: tuple | None = None
        self.verified_as: tuple | None = None
        if result_types is None:
            result_types = self.infer_types(operand_types)
            self.inferred_from = inference_record(self, operand_types, result_types)
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        for v in operands:
            self.operands.append(v)
            v.uses.append((self, len(self.operands) - 1))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = [a for a in vars(cls).values() if isinstance(a, Attr)]
        keys = {a.key for a in own}
        inherited = [a for a in cls.__base__.attr_defs if a.key not in keys]
        cls.attr_defs = tuple(own + inherited)
        cls.attr_names = tuple(a.key for a in cls.attr_defs)  # type: ignore[misc]
        cls.text_attr_names = tuple(a.key for a in cls.attr_defs if not a.in_type)
        cls.parsed_attr_names = cls.text_attr_names
        cls.has_verify_hook = cls.verify_ is not Op.verify_

    # -- hooks ---------------------------------------------------------------------------
    @classmethod
    def normalize(cls, attrs: Mapping[str, Any], operand_types: Sequence[TensorType]) -> dict:
        """The attributes in canonical form, in declaration order: each declared one
        converted (or defaulted), then `relate_attrs`. Accepts its own output.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> from stridec.ir.ops import PermuteOp
        >>> PermuteOp.normalize({"dims": [-1, 0, 1]}, [x.type])
        {'dims': (-1, 0, 1)}
        """
        out: dict[str, Any] = {}
        name = cls.name
        for a in cls.attr_defs:
            key = a.key
            value = attrs.get(key)
            if value is None:
                if a.required:
                    raise VerificationError(f"{name}: missing attribute '{key}'")
                if a.default is None:
                    out[key] = None
                    continue
                if key not in attrs:
                    value = a.default
            out[key] = a.convert(name, key, value)
        cls.relate_attrs(out, operand_types)
        return out

    @classmethod
    def relate_attrs(cls, attrs: dict[str, Any], operand_types: Sequence[TensorType]) -> None:
        """Check (and complete, in place) what ties the converted attributes to each other
        and to the operand types.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> from stridec.ir.ops import PadOp
        >>> PadOp.relate_attrs({"pad": (1,), "value": 0}, [x.type])
        Traceback (most recent call last):
            ...
        stridec.errors.ShapeError: pad: 'pad' must hold pairs for at most 3 dims; got [1]
        """

    @classmethod
    def bound_attrs(cls, attrs: dict[str, Any], operand_types: Sequence[TensorType]) -> dict:
        """The attributes of this op rebuilt by `Graph.bind`, its symbols replaced by
        their values (`attrs`), over the bound operands: as given, unless an op must
        read them anew at those values.

        >>> g = stridec.Graph("g")
        >>> x = g.input("x", ("N", 3), "float32")
        >>> y = x.reshape(-1)
        >>> print(g.bind({"N": 4}).ops[1].printed_attrs())   # what bind rebuilt
        {'sizes': (12,)}
        """
        return attrs

    def infer_types(self, operand_types: Sequence[TensorType]) -> list[TensorType]:
        """The result types for operands of `operand_types` (each op's rule: sizes,
        dtype and layout over the operand's storage).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> op = x.transpose(0, 1).owner
        >>> [str(t) for t in op.infer_types([x.type])]
        ['tensor<3x2x4xf32, strided<[4, 12, 1], offset: 0>>']
        """
        raise NotImplementedError(self.name)

    def verify_(self) -> None:
        """Per-op checks beyond attribute normalization; raise VerificationError.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> x.transpose(0, 1).owner.verify_()
        """

    def written_root(self) -> Value | None:
        """The root version this op writes over in place (`write`'s storage, a `copy`
        into a buffer, a placed Philox op's buffer), or None: most ops write nothing.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3), "float32")
        >>> x.t().owner.written_root() is None
        True
        """
        return None

    def aliases_operand(self) -> bool:
        """Whether the results address the storage of operand 0 (a view).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> x.transpose(0, 1).owner.aliases_operand(), x.clone().owner.aliases_operand()
        (True, False)
        """
        return self.is_view

    def printed_attrs(self) -> dict[str, Any]:
        """Attributes as the text form shows them, in declaration order, None left out
        (and those the result type gives).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> x[:, 1:].owner.printed_attrs()
        {'dim': 1, 'start': 1, 'step': 1}
        """
        attrs = self.attrs
        return {k: attrs[k] for k in self.text_attr_names if attrs[k] is not None}

    @classmethod
    def text_form(
        cls, operands: Sequence[Value], attrs: Mapping[str, Any]
    ) -> tuple[type[Op], Mapping[str, Any]]:
        """The class the parser builds for this op name, and its attributes, from the
        parsed operands and attributes: this class and those, but where one name of
        older text stood for several ops (`copy` with the attributes of a `fill`).

        >>> from stridec.ir.ops import PermuteOp
        >>> PermuteOp.text_form([x], {"dims": [1, 0, 2]})[0].name
        'permute'
        """
        return cls, attrs

    @classmethod
    def from_text(
        cls,
        operands: Sequence[Value],
        attrs: Mapping[str, Any],
        result_types: Sequence[TensorType],
    ) -> Op:
        """Build from parsed text; the printed result types must equal the inferred ones.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> from stridec.ir.ops import PermuteOp
        >>> op = PermuteOp.from_text([x], {"dims": [2, 0, 1]}, [x.permute(2, 0, 1).type])
        >>> op.name
        'permute'
        """
        op = cls(operands, attrs)
        got = [v.type for v in op.results]
        if list(result_types) != got:
            shown = ", ".join(str(t) for t in got)
            given = ", ".join(str(t) for t in result_types)
            op.drop_uses()
            raise VerificationError(f"{cls.name}: result type(s) should be {shown}; got {given}")
        return op

    # -- structure -------------------------------------------------------------------------
    @property
    def result(self) -> Value:
        """The op's one result; a `VerificationError` for an op of several.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> print(x.transpose(0, 1).owner.result.type)
        tensor<3x2x4xf32, strided<[4, 12, 1], offset: 0>>
        """
        if len(self.results) != 1:
            raise VerificationError(f"{self.name}: has {len(self.results)} results, not one")
        return self.results[0]

    def set_operand(self, i: int, new: Value) -> None:
        """Make operand `i` read `new` (its uses updated).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> y = x.transpose(0, 1)
        >>> z = g.input("z", (2, 3, 4), "float32")
        >>> y.owner.set_operand(0, z)
        >>> y.owner.operands[0] is z, x.users
        (True, [])
        """
        old = self.operands[i]
        old.uses.remove((self, i))
        self.operands[i] = new
        new.uses.append((self, i))

    def drop_uses(self) -> None:
        """Remove this op from its operands' `uses` (before it is discarded).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> op = x.transpose(0, 1).owner
        >>> op.drop_uses()
        >>> x.users
        []
        """
        for i, v in enumerate(self.operands):
            try:
                v.uses.remove((self, i))
            except ValueError:
                pass

    def with_attrs(self, **changes: Any) -> dict[str, Any]:
        """This op's attributes with `changes` applied (a new dict; the op is unchanged).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> x.transpose(0, 1).owner.with_attrs(dim1=2)
        {'dim0': 0, 'dim1': 2}
        """
        merged = dict(self.attrs)
        merged.update(changes)
        return merged

    def __repr__(self) -> str:
        return f"<Op {self.name} {dict(self.attrs)}>"


def _bind_attr(value: Any, bindings: Mapping[str, int]) -> Any:
    """An attribute with the bound symbols replaced (in sizes, lists and layouts)."""
    if isinstance(value, Sym):
        return substitute(value, bindings)
    if isinstance(value, Layout):
        return value.replace_symbols(lambda sizes: _bind_attr(sizes, bindings))
    if isinstance(value, (list, tuple)):
        return type(value)(_bind_attr(v, bindings) for v in value)
    return value


class Value:
    """An SSA value: result `index` of op `owner`, with a `TensorType`.

    The builder methods that mirror `torch.Tensor` (`permute`, `__getitem__`, `to`, …)
    come from `stridec.ir.builder.ValueBuilder`, added on top of this core.

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> y = x.transpose(1, 2)
    >>> y
    <Value transpose#0 : tensor<2x4x3xf32, strided<[12, 1, 4], offset: 0>>>
    >>> y.owner.name, y.index, y.root() is x
    ('transpose', 0, True)
    """

    __slots__ = ("type", "owner", "index", "uses", "__weakref__")

    def __init__(self, type: TensorType, owner: Op, index: int) -> None:
        self.type = type
        self.owner = owner
        self.index = index
        self.uses: list[tuple[Op, int]] = []

    @property
    def graph(self) -> Graph | None:
        """The graph the value belongs to.

        >>> x.graph is g
        True
        """
        return self.owner.graph

    @property
    def shape(self) -> tuple[int, ...]:
        """The sizes, as `torch.Tensor.shape` (a tuple).

        >>> x.shape
        (2, 3, 4)
        """
        return self.type.sizes

    @property
    def dtype(self) -> Any:
        """The element type (a `stridec.DType`).

        >>> x.dtype
        stridec.float32
        """
        return self.type.dtype

    @property
    def ndim(self) -> int:
        """The rank, as `torch.Tensor.ndim`.

        >>> x.ndim
        3
        """
        return self.type.rank

    def dim(self) -> int:
        """The rank, as `torch.Tensor.dim()`.

        >>> x.dim()
        3
        """
        return self.type.rank

    def size(self, dim: int | None = None) -> Any:
        """As `torch.Tensor.size`: the sizes, or the size of `dim`.

        >>> x.size(), x.size(-1)
        ((2, 3, 4), 4)
        """
        if dim is None:
            return self.type.sizes
        return self.type.sizes[dim]

    def numel(self) -> int:
        """The number of elements, as `torch.Tensor.numel()`.

        >>> x.numel()
        24
        """
        return self.type.numel

    @property
    def users(self) -> list[Op]:
        """The ops that read this value, in graph order.

        >>> y = x.transpose(0, 1)
        >>> [op.name for op in x.users]
        ['transpose']
        """
        seen: dict[int, Op] = {}
        for op, _ in self.uses:
            seen.setdefault(id(op), op)
        return list(seen.values())

    def root(self) -> Value:
        """The value whose storage this one addresses: walk back through view ops.

        >>> x.transpose(0, 1)[1].root() is x
        True
        """
        v = self
        while v.owner.aliases_operand():
            v = v.owner.operands[0]
        return v

    def replace_all_uses_with(self, new: Value) -> None:
        """Every use of this value reads `new` instead (appended to `new.uses` in order).

        One move of the whole use list: `set_operand` per use would search this list
        each time, n²/2 comparisons for a value read n times.

        >>> y = x.transpose(0, 1)
        >>> z = g.input("z", (2, 3, 4), "float32")
        >>> x.replace_all_uses_with(z)
        >>> y.owner.operands[0] is z
        True
        """
        if new is self:
            return
        uses = self.uses[:]
        self.uses.clear()
        for op, i in uses:
            op.operands[i] = new
        new.uses.extend(uses)

    def __repr__(self) -> str:
        return f"<Value {self.owner.name}#{self.index} : {self.type}>"


class Graph:
    """An ordered list of ops with one `output` op at the end once the graph is complete.

    The methods that add sources and the output (`input`, `full`, `philox`, `output`)
    come from `stridec.ir.builder.GraphBuilder`, added on top of this core.

    >>> g = stridec.Graph("nhwc")
    >>> x = g.input("x", (2, 3, 4, 5), "float16")
    >>> g.output(x.permute(0, 2, 3, 1).contiguous())
    >>> print(g, end="")
    graph @nhwc {
      %x = input {name = "x"} : tensor<2x3x4x5xf16>
      %0 = permute %x {dims = [0, 2, 3, 1]} : tensor<2x4x5x3xf16, strided<[60, 5, 1, 20], of...
      %1 = contiguous %0 : tensor<2x4x5x3xf16>
      output %1
    }
    """

    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.ops: list[Op] = []

    # -- building ----------------------------------------------------------------------
    def append(self, op: Op) -> Op:
        """Add `op` at the end (before the graph has an `output` op) and return it; the
        builder methods call this.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> from stridec.ir.ops import PermuteOp
        >>> op = g.append(PermuteOp([x], {"dims": [2, 0, 1]}))
        >>> print(op.result.type)
        tensor<4x2x3xf32, strided<[1, 12, 4], offset: 0>>
        """
        if self.output_op is not None:
            raise VerificationError(
                f"{op.name}: graph {self.name!r} is complete (it has an output op); "
                "build every op before calling output()"
            )
        if op.graph is not None:
            raise VerificationError(f"{op.name}: op already belongs to graph {op.graph.name!r}")
        for v in op.operands:
            if v.owner.graph is not self:
                raise VerificationError(
                    f"{op.name}: operand {v!r} belongs to another graph, not {self.name!r}"
                )
        op.graph = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Op) -> Op:
        """Put `op` at position `index` (passes inserting ops); return it.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> from stridec.ir.ops import PermuteOp
        >>> op = g.insert(1, PermuteOp([x], {"dims": [2, 0, 1]}))
        >>> [o.name for o in g]
        ['input', 'permute']
        """
        op.graph = self
        self.ops.insert(index, op)
        return op

    def erase(self, op: Op) -> None:
        """Remove an op whose results are unused.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> y = x.transpose(0, 1)
        >>> g.erase(y.owner)
        >>> [op.name for op in g]
        ['input']
        """
        for r in op.results:
            if r.uses:
                raise VerificationError(f"{op.name}: cannot erase, result {r.index} still used")
        op.drop_uses()
        self.ops.remove(op)
        op.graph = None

    def set_ops(self, ops: Iterable[Op]) -> None:
        """Replace the op order wholesale (passes that rebuild the list in one sweep).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> y = x.transpose(0, 1)
        >>> g.set_ops(list(g))
        >>> len(g)
        2
        """
        self.ops = list(ops)
        for op in self.ops:
            op.graph = self

    def __iter__(self) -> Iterator[Op]:
        """The ops, in order.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> y = x.transpose(0, 1)
        >>> [op.name for op in g]
        ['input', 'transpose']
        """
        return iter(self.ops)

    def __len__(self) -> int:
        """The number of ops.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> y = x.transpose(0, 1)
        >>> len(g)
        2
        """
        return len(self.ops)

    # -- queries -----------------------------------------------------------------------
    @property
    def inputs(self) -> list[Value]:
        """The graph's arguments, in order (the results of its `input` ops).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> [v.owner.arg_name for v in g.inputs]
        ['x']
        """
        return [op.result for op in self.ops if op.is_argument]

    @property
    def output_op(self) -> Op | None:
        """The `output` op, or None while the graph is being built.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> g.output_op is None
        True
        """
        if self.ops and self.ops[-1].is_terminator:
            return self.ops[-1]
        return None

    @property
    def outputs(self) -> list[Value]:
        """The graph's results, in order (the operands of its `output` op; empty before it).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> g.output(x, x.transpose(0, 2))
        >>> [v.shape for v in g.outputs]
        [(2, 3, 4), (4, 3, 2)]
        """
        out = self.output_op
        return list(out.operands) if out is not None else []

    def verify(self) -> None:
        """Structural checks, then each op's `verify_` hook. Raises VerificationError.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> g.output(x.transpose(0, 1).contiguous())
        >>> g.verify()
        """
        verify_graph(self)

    def __str__(self) -> str:
        return print_graph(self)

    def __repr__(self) -> str:
        return f"<Graph {self.name!r}: {len(self.ops)} ops>"

    def _repr_svg_(self) -> str | None:
        """The picture of `stridec.draw` for notebooks; None without matplotlib, so the
        text form shows. Drawn by `stridec.ir.display`'s renderer: `ir` does not import
        the drawing code."""
        return display.svg(self)

    def specialize(self, layouts: Mapping[str, Layout]) -> Graph:
        """A copy whose inputs named in `layouts` have those layouts (the caller's strides
        and offset); every op is rebuilt by type inference, so each view's layout over its
        root follows. Raises the op's `StridecError` where a layout does not suit it (a
        `view` that is not viewable from the caller's strides).

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> g.output(x.transpose(0, 1).contiguous())
        >>> s = g.specialize({"x": stridec.Layout.contiguous((4, 3, 2)).permute((2, 1, 0))})
        >>> print(s.inputs[0].type)
        tensor<2x3x4xf32, strided<[1, 2, 6], offset: 0>>
        """
        new = Graph(self.name)
        mapping: dict[int, Value] = {}
        for op in self.ops:
            attrs = dict(op.attrs)
            if op.is_argument and op.arg_name in layouts:
                layout = layouts[op.arg_name]
                if not layout.same_addresses(op.result.type.layout):
                    attrs["storage"] = None  # declared for another layout: not this one's
                attrs["layout"] = None if layout.is_default() else layout
            rebuilt = type(op)([mapping[id(v)] for v in op.operands], attrs)
            new.append(rebuilt)
            for a, b in zip(op.results, rebuilt.results, strict=False):
                mapping[id(a)] = b
        return new

    def symbols(self) -> tuple[str, ...]:
        """The names of the symbolic sizes of the inputs, in order of first appearance
        (input by input, dim by dim): the values a call binds (docs/symbolic.md).

        >>> g = stridec.Graph("g")
        >>> x = g.input("x", ("N", 3, "H"), "float32")
        >>> g.symbols()
        ('N', 'H')
        """
        seen: dict[str, None] = {}
        for v in self.inputs:
            for n in v.type.sizes:
                for name in sorted(free_symbols(n)):
                    seen.setdefault(name, None)
        return tuple(seen)

    def bind(self, bindings: Mapping[str, int]) -> Graph:
        """A copy with the symbols of `bindings` replaced by their values, every op
        rebuilt by type inference: the static graph of those sizes. A symbol left out
        stays symbolic. Raises the op's `StridecError` where a value does not suit it.

        >>> g = stridec.Graph("any_batch")
        >>> x = g.input("x", ("N", 3), "float32")
        >>> g.output(x.t().contiguous())
        >>> print(g.bind({"N": 8}).inputs[0].type)
        tensor<8x3xf32>
        """
        new = Graph(self.name)
        mapping: dict[int, Value] = {}
        for op in self.ops:
            attrs = {k: _bind_attr(v, bindings) for k, v in op.attrs.items()}
            operands = [mapping[id(v)] for v in op.operands]
            attrs = type(op).bound_attrs(attrs, [v.type for v in operands])
            rebuilt = type(op)(operands, attrs)
            new.append(rebuilt)
            for a, b in zip(op.results, rebuilt.results, strict=False):
                mapping[id(a)] = b
        return new

    def clone(self) -> Graph:
        """A deep copy: same ops, attributes and types, fresh values.

        >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
        >>> g.output(x.transpose(0, 1).contiguous())
        >>> h = g.clone()
        >>> str(h) == str(g), h.ops[0] is g.ops[0]
        (True, False)
        """
        new = Graph(self.name)
        mapping: dict[int, Value] = {}
        for op in self.ops:
            operands = [mapping[id(v)] for v in op.operands]
            copy = type(op)(operands, dict(op.attrs), [v.type for v in op.results])
            new.append(copy)
            for a, b in zip(op.results, copy.results, strict=False):
                mapping[id(a)] = b
        return new
