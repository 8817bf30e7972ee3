"""Compiled graphs as torch custom operators: torch.library.opcheck, fake tensors with the
real sizes and strides, the no-aliasing contract, and torch.compile(fullgraph=True)."""

from __future__ import annotations

import uuid

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch_layout_cases import FIVE, Case

import stridec
from stridec.errors import CallError
from stridec.torch import TorchOp, register

NS = "stridec_test_custom_op"


def _tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _op(case: Case, dtype: str = "float32", **kwargs) -> TorchOp:
    suffix = "_triton_op" if kwargs.get("use_triton_op") else ""
    return register(case.graph(dtype), f"{NS}::{case.name}_{dtype}{suffix}", **kwargs)


@pytest.mark.parametrize("case", FIVE, ids=[c.name for c in FIVE])
def test_opcheck(case):
    """All of opcheck's tests: schema (no input mutated or aliased), autograd
    registration, fake tensor against the real kernel, aot_autograd with dynamic shapes."""
    op = _op(case)
    result = torch.library.opcheck(op.overload, case.inputs(torch.float32, requires_grad=True))
    assert set(result.values()) == {"SUCCESS"}, result


def test_opcheck_on_strided_inputs():
    case = FIVE[0]
    op = _op(case)
    (x,) = case.inputs(torch.float32)
    transposed = x.transpose(1, 3).contiguous().transpose(1, 3).requires_grad_()
    result = torch.library.opcheck(op.overload, (transposed,))
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("case", FIVE, ids=[c.name for c in FIVE])
def test_values_match_torch(case):
    op = _op(case)
    xs = case.inputs(torch.float32)
    for got, want in zip(_tuple(op(*xs)), _tuple(case.torch_fn(*xs)), strict=True):
        assert torch.equal(got, want)
    assert torch.equal(_tuple(getattr(torch.ops, NS).__getattr__(f"{case.name}_float32")(*xs))[0],
                       _tuple(case.torch_fn(*xs))[0])


def _layout_graph() -> stridec.Graph:
    """Outputs of several layouts: a transposed view of a materialized buffer, a
    channels-last copy, a view of the input, the same value twice, two pieces of one
    buffer (the second at an offset), a flipped input."""
    g = stridec.Graph("layouts")
    x = g.input("x", (2, 3, 4, 5), "float32")
    nhwc = stridec.Layout.for_order((2, 3, 4, 5), (0, 2, 3, 1))
    rows = x.flatten(0, 2)
    a, b = stridec.cat([rows, rows], 0).split(24, 0)
    g.output(x.contiguous().permute(3, 2, 1, 0), x.copy_to(nhwc), x[:, 1:], x[:, 1:], a, b,
             x.flip(3))
    return g


def _torch_layouts(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    rows = x.flatten(0, 2)
    a, b = torch.cat([rows, rows], 0).split(24, 0)
    return (x.permute(3, 2, 1, 0), x.contiguous(memory_format=torch.channels_last), x[:, 1:],
            x[:, 1:], a, b, x.flip(3))


def test_fake_sizes_strides_dtypes_equal_real():
    op = register(_layout_graph(), f"{NS}::layouts")
    x = torch.randn(2, 3, 4, 5)
    real = _tuple(op(x))
    with FakeTensorMode() as mode:
        fake = _tuple(op(mode.from_tensor(x)))
    assert len(fake) == len(real) == 7
    for k, (f, r, want) in enumerate(zip(fake, real, _torch_layouts(x), strict=True)):
        assert (f.shape, f.stride(), f.dtype) == (r.shape, r.stride(), r.dtype), f"output {k}"
        assert f.storage_offset() == r.storage_offset() == 0
        assert torch.equal(r, want)
    assert real[1].stride() == (60, 1, 15, 3)  # channels-last


def test_fake_follows_input_strides():
    op = _op(FIVE[0])
    (x,) = FIVE[0].inputs(torch.float32)
    xt = x.transpose(2, 3).contiguous().transpose(2, 3)
    for t in (x, xt):
        r = op(t)
        with FakeTensorMode() as mode:
            f = op(mode.from_tensor(t))
        assert (f.shape, f.stride()) == (r.shape, r.stride())


def test_outputs_never_alias_inputs_or_each_other():
    op = register(_layout_graph(), f"{NS}::layouts")
    x = torch.randn(2, 3, 4, 5)
    outs = _tuple(op(x))
    storages = [t.untyped_storage().data_ptr() for t in outs]
    assert x.untyped_storage().data_ptr() not in storages
    assert len(set(storages)) == len(storages)
    before = [t.clone() for t in outs]
    x.add_(1.0)  # writing the input changes no output
    for t, b in zip(outs, before, strict=True):
        assert torch.equal(t, b)


def test_call_errors_name_the_argument():
    op = _op(FIVE[4])  # cat(x (2, 2), y (2, 3))
    x, y = FIVE[4].inputs(torch.float32)
    with pytest.raises(CallError, match="argument 'y'"):
        op(x, y[:, :2])
    with pytest.raises(CallError, match="argument 'x'.*dtype"):
        op(x.double(), y)
    y_cut = y[:, :2]
    with FakeTensorMode() as mode:
        with pytest.raises(CallError, match="argument 'y'"):
            op(mode.from_tensor(x), mode.from_tensor(y_cut))


def test_register_names():
    case = FIVE[0]
    op = _op(case)
    assert _op(case) is op  # the same graph under the same name: the same operator
    assert stridec.compile(case.graph("float32")).as_torch_op(op.qualname) is op
    with pytest.raises(CallError, match="already registered"):
        register(FIVE[1].graph("float32"), op.qualname)
    for bad in ("noseparator", "a::b::c", "ns::has space", "9ns::x"):
        with pytest.raises(CallError, match="namespace::name"):
            register(case.graph("float32"), bad)
    with pytest.raises(CallError, match="Graph or CompiledGraph"):
        register("graph", f"{NS}::text")


def test_as_torch_op_is_torch_ops_entry():
    g = stridec.Graph("to_nhwc")
    x = g.input("x", (1, 2, 3, 3), "float16")
    g.output(x.permute(0, 2, 3, 1).contiguous())
    op = stridec.compile(g).as_torch_op(f"{NS}::to_nhwc")
    t = torch.randn(1, 2, 3, 3, dtype=torch.float16)
    assert torch.equal(getattr(torch.ops, NS).to_nhwc(t), t.permute(0, 2, 3, 1))
    assert "Tensor x" in str(op.overload._schema)


def _compiled_twice(op, case, device="cpu", **compile_kwargs):
    """A function calling the op inside torch.compile(fullgraph=True), run on contiguous
    inputs, then on inputs with other strides, then on the first again."""
    torch._dynamo.reset()

    @torch.compile(fullgraph=True, **compile_kwargs)
    def f(*xs):
        return _tuple(op(*xs))[0] * 2.0

    xs = [t.to(device) for t in case.inputs(torch.float32)]
    strided = [t.transpose(0, -1).contiguous().transpose(0, -1) for t in xs]
    for args in (xs, strided, xs):
        assert torch.equal(f(*args), _tuple(case.torch_fn(*args))[0] * 2.0)


def test_torch_compile_fullgraph_new_strides_one_new_specialization():
    case = Case("slice_step", FIVE[3].sizes, FIVE[3].build, FIVE[3].torch_fn)
    unique = f"_{uuid.uuid4().hex[:8]}"  # no plan cached by another test or process
    op = register(case.graph("float32", unique), f"{NS}::fresh{unique}")
    _compiled_twice(op, case, backend="aot_eager")
    assert op.compiled.stats.compiles == 2


def test_torch_compile_backward():
    case = FIVE[1]  # NCHW4 pack: the padded channels get no gradient
    op = _op(case)
    torch._dynamo.reset()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def loss(x, w):
        return (op(x) * w).sum()

    (x,) = case.inputs(torch.float32, requires_grad=True)
    w = torch.randn(1, 1, 2, 2, 4)
    loss(x, w).backward()
    xr = x.detach().clone().requires_grad_()
    (case.torch_fn(xr) * w).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)


def test_triton_op_definition_runs_on_cpu():
    """The CUDA definition (torch.library.triton_op) keeps CPU calls opaque: opcheck and
    aot_eager pass through the interpreter kernel registered for CPU."""
    case = FIVE[0]
    op = _op(case, use_triton_op=True)
    result = torch.library.opcheck(op.overload, case.inputs(torch.float32, requires_grad=True))
    assert set(result.values()) == {"SUCCESS"}, result
    _compiled_twice(op, case, backend="aot_eager")


def test_cached_launchers_trace_whatever_call_built_them():
    """The torch op's runner is built once per program and kept: built by an eager CUDA
    call (triton_op disables wrap_triton there), it must still launch through the
    traceable wrapper when a later `torch.compile` traces the op. Traced here on fake CPU
    tensors: each launch must become a `triton_kernel_wrapper_mutation` node."""
    from torch._library.triton import set_wrap_triton_enabled
    from torch.fx.experimental.proxy_tensor import make_fx

    from stridec.compiler.codegen.lower import lower_to_program
    from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager
    from stridec.runtime import launch
    from stridec.torch.custom_op import _TRACED_TRITON

    case = FIVE[4]  # cat: a batch of copies; the flip, one copy
    graph = case.graph("float32", f"_{uuid.uuid4().hex[:8]}")
    PassManager.parse(DEFAULT_PIPELINE).run(graph)
    program = lower_to_program(graph, "cuda")
    with set_wrap_triton_enabled(False):  # as triton_op runs an eager CUDA call
        built = launch.runner(program, _TRACED_TRITON, inputs_as_given=True)
    assert launch.runner(program, _TRACED_TRITON, inputs_as_given=True) is built  # cached
    traced = make_fx(lambda *xs: built.run(xs, xs[0].device),
                     tracing_mode="fake")(*case.inputs(torch.float32))
    hop = torch.ops.higher_order.triton_kernel_wrapper_mutation
    assert [n.target for n in traced.graph.nodes].count(hop) == len(program.launches)


@pytest.mark.gpu
def test_inductor_sees_the_kernels():
    from torch._inductor.utils import run_and_get_code

    case = FIVE[0]
    op = _op(case, use_triton_op=True)
    torch._dynamo.reset()
    f = torch.compile(lambda x: op(x) + 1.0, fullgraph=True)
    (x,) = case.inputs(torch.float32)
    x = x.cuda()
    out, code = run_and_get_code(f, x)
    assert torch.equal(out, case.torch_fn(x) + 1.0)
    kernel = op.program_for([x]).kernels[0].name
    assert kernel in "\n".join(code)  # a user-defined Triton kernel in Inductor's output


@pytest.mark.gpu
def test_cuda_eager_and_strides():
    case = FIVE[1]
    op = _op(case, use_triton_op=True)
    (x,) = case.inputs(torch.float32)
    for t in (x.cuda(), x.cuda().transpose(2, 3).contiguous().transpose(2, 3)):
        assert torch.equal(op(t), case.torch_fn(t))
    _compiled_twice(op, case, device="cuda", backend="inductor")


@pytest.mark.gpu
def test_cuda_eager_then_inductor_sees_the_kernels():
    """Eager CUDA calls first (their runner is cached), then torch.compile of the same op:
    Inductor must still see every kernel and the values stay torch's."""
    from torch._inductor.utils import run_and_get_code

    case = FIVE[4]  # cat
    unique = f"_{uuid.uuid4().hex[:8]}"
    op = register(case.graph("float32", unique), f"{NS}::eager_first{unique}",
                  use_triton_op=True)
    xs = [t.cuda() for t in case.inputs(torch.float32)]
    for _ in range(2):
        assert torch.equal(op(*xs), case.torch_fn(*xs))
    torch._dynamo.reset()
    f = torch.compile(lambda *ts: op(*ts) + 1.0, fullgraph=True)
    out, code = run_and_get_code(f, *xs)
    assert torch.equal(out, case.torch_fn(*xs) + 1.0)
    for kernel in op.program_for(xs).kernels:
        assert kernel.name in "\n".join(code)
    assert torch.equal(op(*xs), case.torch_fn(*xs))  # eager again after the compile


# -- the CPU operator's dispatch: a plain call runs straight, everything else as torch's --
def _shuffle_op(name: str):
    def channel_shuffle(x):
        b, c, h, w = x.shape
        return x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w)

    x = torch.randn(2, 6, 3, 4)
    return register(stridec.trace(channel_shuffle, x), f"{NS}::{name}",
                    use_triton_op=False), channel_shuffle


def test_dispatch_modes_see_the_operator():
    from torch.utils._python_dispatch import TorchDispatchMode

    op, shuffle = _shuffle_op("shuffle_mode")
    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.randn(2, 6, 3, 4)
    with Log():
        y = op(x)
    assert seen == [f"{NS}.shuffle_mode.default"] and torch.equal(y, shuffle(x))


@pytest.mark.parametrize("how", ["vmap", "functionalize", "inference_mode", "no_grad",
                                 "fake", "autocast"])
def test_calls_through_torch_transforms(how):
    op, shuffle = _shuffle_op(f"shuffle_{how}")
    x = torch.randn(2, 6, 3, 4, requires_grad=how == "no_grad")
    want = shuffle(x.detach())
    if how == "vmap":
        xs = torch.randn(3, 2, 6, 3, 4)
        assert torch.equal(torch.vmap(op)(xs), torch.stack([shuffle(t) for t in xs]))
        return
    if how == "functionalize":
        got = torch.func.functionalize(op)(x)
    elif how == "inference_mode":
        with torch.inference_mode():
            got = op(x)
    elif how == "no_grad":
        with torch.no_grad():
            got = op(x)
        assert got.grad_fn is None and not got.requires_grad
    elif how == "autocast":
        with torch.autocast("cpu"):
            got = op(x)
    else:
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode() as mode:
            got = op(mode.from_tensor(x))
        assert got.shape == want.shape and got.stride() == want.stride()
        return
    assert torch.equal(got, want) and got.stride() == want.stride()


def test_grad_through_the_operator_as_torch():
    op, shuffle = _shuffle_op("shuffle_grad")
    x = torch.randn(2, 6, 3, 4, dtype=torch.float32)
    w = torch.randn(2, 6, 3, 4)
    want = torch.func.grad(lambda t: (shuffle(t) * w).sum())(x)
    leaf = x.clone().requires_grad_()
    y = op(leaf)
    assert y.grad_fn is not None
    (y * w).sum().backward()
    assert torch.equal(leaf.grad, want)


def test_outputs_at_offsets_or_sharing_a_buffer_get_memory_of_their_own():
    g = stridec.Graph("pieces")
    x = g.input("x", (4, 6), "float32")
    t = x.t().contiguous()
    a, b = t.split(3)
    g.output(a, b, t, t[1:])
    op = register(g, f"{NS}::pieces", use_triton_op=False)
    x = torch.randn(4, 6)
    outs = op(x)
    want = (x.t()[:3], x.t()[3:], x.t(), x.t()[1:])
    fakes = op._fake(x)
    ptrs = {o.untyped_storage().data_ptr() for o in outs}
    assert len(ptrs) == 4 and x.untyped_storage().data_ptr() not in ptrs
    for o, w, f in zip(outs, want, fakes, strict=True):
        assert torch.equal(o, w) and o.storage_offset() == 0 and o.stride() == f.stride()
