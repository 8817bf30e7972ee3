"""Failures the graph fuzzer (test_fuzz.py) found, each as a named test on the minimal graph.

Every test compares the compiled graph (the `interpret` backend: the generated Triton
kernels run by Triton's interpreter) with an oracle written independently of stridec:
torch, or the Philox definition of docs/design.md#philox (the new state is the counter advanced by
⌈numel/4⌉, the key unchanged).

A test marked `xfail(strict=True)` is a bug still open in a file outside this suite's
remit (named in its reason); the fuzzer skips graphs that show it (`KNOWN_BUGS` in
test_fuzz.py). When the fix lands the test passes, strict xfail reports it as XPASS and
fails: remove the mark here and the entry in `KNOWN_BUGS`.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch_oracle import check_against_torch

import stridec
from stridec.errors import ShapeError


def compiled(g: stridec.Graph, *args: torch.Tensor) -> torch.Tensor:
    """The graph run by the interpreter and by the cpu backend, which must agree bit for
    bit; the cpu backend's result."""
    interpreted = stridec.compile(g, backend="interpret")(*args)
    native = stridec.compile(g, backend="cpu")(*args)
    pairs = (zip(interpreted, native, strict=True) if isinstance(native, tuple)
             else [(interpreted, native)])
    for a, b in pairs:
        assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
        assert torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
    return native


def state(*words: int) -> torch.Tensor:
    return torch.tensor(words, dtype=torch.int64).to(torch.uint32)


def bits_equal(got: torch.Tensor, want: torch.Tensor) -> bool:
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype == torch.uint32:
        got, want = got.view(torch.int32), want.view(torch.int32)
    return torch.equal(got, want)


# --------------------------------------------------------------------------- Philox state


def test_copy_of_philox_new_state_is_not_fused_as_values() -> None:
    """Found as `cat(new_state, <empty bits>)`; minimal: a copy of the new state,
    `new_state.clone()` (a `contiguous()` of it is the state itself, no copy).
    Counter 5 advanced by ⌈6/4⌉ = 2 is 7; the key words stay."""
    g = stridec.Graph("new_state_copy")
    s = g.input("state", (6,), "uint32")
    _, new_state = g.philox(s, (2, 3))
    g.output(new_state.clone())
    got = compiled(g, state(5, 0, 0, 0, 0x12345678, 0x9ABCDEF0))
    assert bits_equal(got, state(7, 0, 0, 0, 0x12345678, 0x9ABCDEF0)), got.tolist()


def test_copy_of_an_empty_generators_new_state() -> None:
    """Found as `cat(new_state, <empty bits>)` with sizes (0, 0): numel 0 advances the
    counter by ⌈0/4⌉ = 0, so the new state is the state."""
    g = stridec.Graph("empty_new_state_copy")
    s = g.input("state", (6,), "uint32")
    _, new_state = g.philox(s, (0, 0))
    g.output(new_state.clone())
    words = state(0xFFFFFFFF, 1, 2, 3, 4, 5)
    got = compiled(g, words)
    assert bits_equal(got, words), got.tolist()


# --------------------------------------------------------------------------- fill values


def test_a_pack_fill_converts_before_a_fused_cast() -> None:
    """`x.pack("NCHW4", fill=-3.75).to(float32)` on int8: the padded channels hold the
    fill as int8 holds it, -3 (torch.full((2,), -3.75, dtype=int8)), and the cast gives
    -3.0 -- not -3.75, which the fused copy wrote when it cast the raw fill (fixed in
    compiler/copy_fusion.py: the producer's fill goes through its dtype). (Found on uint8
    and fill=254.75; int8 -> float32 is one of the suite's cast libraries,
    tests/cast_pairs.py. A fill never wraps now.)"""
    g = stridec.Graph("pack_fill_cast")
    x = g.input("x", (1, 1, 1, 1), "int8")
    g.output(x.pack("NCHW4", fill=-3.75).to("float32"))
    t = torch.full((1, 1, 1, 1), 7, dtype=torch.int8)
    held = torch.full((2,), -3.75, dtype=torch.int8)[0].item()
    want = torch.tensor([7.0, held, held, held]).reshape(1, 1, 1, 1, 4)
    assert torch.equal(compiled(g, t), want)


@pytest.mark.parametrize("build", [
    lambda x: x.pack("pitched<4>", fill=70000.0),
    lambda x: x.pack("NCHW4", fill=-70000.0),
    lambda x: stridec.pad(x, (1, 1), value=1e6),
    lambda x: x.graph.full((2,), 70000.0, "float16"),
], ids=["pitched", "nchw4", "pad", "full"])
def test_a_fill_float16_cannot_hold_is_refused(build: object) -> None:
    """70000 is above float16's largest 65504: torch.full refuses it for any tensor of
    more than one element, and so does stridec, at build time. (Before the fix the check
    used a 0-d full, which turns it into inf, and the reference executor then crashed
    with torch's RuntimeError filling the packed buffer.)"""
    with pytest.raises(RuntimeError, match="overflow"):
        torch.full((2,), 70000.0, dtype=torch.float16)
    g = stridec.Graph("fill_overflow")
    x = g.input("x", (1, 3, 2, 2), "float16")
    pattern = r"attribute '(fill|value)' = -?\d+(\.0)? does not fit dtype float16"
    with pytest.raises(ShapeError, match=pattern):
        build(x)  # type: ignore[operator]


def test_philox_packing_with_a_high_fill() -> None:
    """Philox bits (1, 3, 1, 1) packed NCHW4 with fill 4294967294: the padded channel holds
    it. (The fused generator used to refuse the fill with a ShapeError at compile time,
    though the pack op accepts it: fixed in compiler/codegen/philox.py `_fill_bits`.)
    A fill of -2 is refused, as F.pad refuses it for uint32, never wrapped (torch.full
    would wrap it)."""
    g = stridec.Graph("philox_pack_fill")
    s = g.input("state", (6,), "uint32")
    bits, _ = g.philox(s, (1, 3, 1, 1))
    with pytest.raises(RuntimeError, match="overflow"):
        torch.nn.functional.pad(torch.zeros(2, dtype=torch.uint32), (1, 1), value=-2)
    with pytest.raises(ShapeError, match="'fill' = -2 does not fit dtype uint32"):
        bits.pack("NCHW4", fill=-2)
    g.output(bits.pack("NCHW4", fill=4294967294))
    words = state(0, 0, 0, 0, 0, 0)
    got = compiled(g, words)
    # Random123 known answer for counter 0, key 0: 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
    want = state(0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0xFFFFFFFE).reshape(1, 1, 1, 1, 4)
    assert bits_equal(got, want), got.tolist()


# --------------------------------------------------------------------------- casts


def test_float64_to_float16_rounds_through_float32_as_torch() -> None:
    """920.2500000001 → float32 is 920.25 exactly, a tie between the float16 neighbours
    920.0 and 920.5, which rounds to even: 920.0, as torch gives. Rounded once, directly,
    it is above the tie: 920.5."""
    g = stridec.Graph("f64_to_f16")
    x = g.input("x", (2,), "float64")
    g.output(x.to("float16"))
    t = torch.tensor([920.2500000001, -920.2500000001], dtype=torch.float64)
    want = t.to(torch.float16)
    assert want.tolist() == [920.0, -920.0]
    got = compiled(g, t)
    assert bits_equal(got.view(torch.int16), want.view(torch.int16)), got.tolist()


# --------------------------------------------------------------------------- torch fidelity


def test_a_cast_keeps_the_strides_of_a_transposed_value() -> None:
    g = stridec.Graph("cast_t")
    g.output(g.input("x", (2, 3), "float32").t().to("float16"))
    x = torch.arange(6.0).reshape(2, 3)
    got, want = compiled(g, x), x.t().to(torch.float16)
    assert torch.equal(got, want) and got.stride() == want.stride() == (1, 3)


def test_flatten_of_one_dim_is_the_tensor_itself() -> None:
    """Found as `flatten(1, 1)` of an unfold: torch returns the tensor itself, strides
    (3, 1) included, where a reshape to the same sizes would give (1, 1)."""
    g = stridec.Graph("flatten_one_dim")
    g.output(g.input("x", (3,), "float64").unfold(0, 1, 3).flatten(1, 1))
    x = torch.arange(3.0, dtype=torch.float64)
    got, want = compiled(g, x), x.unfold(0, 1, 3).flatten(1, 1)
    assert torch.equal(got, want) and got.stride() == want.stride() == (3, 1)
    assert got.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_as_strided_over_a_copy_at_an_offset_keeps_the_offset() -> None:
    """Found as `as_strided(copy_to(strides (1, 9)), (1,), (1,), 46)`: a view of the
    copy's own storage, at offset 46, on the compiled and the reference backend alike."""
    g = stridec.Graph("as_strided_of_copy")
    v = g.input("x", (9, 7), "float32").copy_to((1, 9))
    g.output(v.as_strided((1,), (1,), 46))
    x = torch.arange(63.0).reshape(9, 7)
    want = x.t().contiguous().t().as_strided((1,), (1,), 46)  # element 46 = x[1, 5]
    for backend in ("interpret", "reference"):
        got = stridec.compile(g, backend=backend)(x)
        assert torch.equal(got, want) and got.storage_offset() == 46


def test_empty_philox_bits_are_row_major() -> None:
    """Found as philox of sizes (0,) returned: torch.empty(0) has stride (1,), as the
    compiled backend gives; the reference built it from numpy with stride (0,)."""
    g = stridec.Graph("empty_bits")
    bits, _ = g.philox(g.input("state", (6,), "uint32"), (0,))
    g.output(bits)
    for backend in ("interpret", "reference"):
        got = stridec.compile(g, backend=backend)(state(1, 2, 3, 4, 5, 6))
        assert got.shape == (0,) and got.stride() == torch.empty(0).stride()


def test_pad_that_only_crops_clones_with_the_operands_strides() -> None:
    """torch's pad with no positive pad crops, then clones: a transposed operand keeps
    its column-major strides; any positive pad gives row-major (or channels-last)."""
    g = stridec.Graph("crop")
    v = g.input("x", (6, 4), "float32").t()
    g.output(stridec.pad(v, (0, 0)), stridec.pad(v, (-1, 0)), stridec.pad(v, (1, -1)))
    x = torch.arange(24.0).reshape(6, 4)
    for got, want in zip(compiled(g, x), (F.pad(x.t(), (0, 0)), F.pad(x.t(), (-1, 0)),
                                          F.pad(x.t(), (1, -1))), strict=True):
        assert torch.equal(got, want) and got.stride() == want.stride()


# --------------------------------------------------------------------------- memory formats


def _strided(sizes: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> torch.Tensor:
    """A float32 tensor of these strides over its own storage, values 0, 1, 2, ..."""
    need = 1 + offset + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True)) if all(
        sizes) else offset
    base = torch.arange(float(max(need, 1)))
    return torch.as_strided(base, sizes, strides, offset)


# Layouts at each edge of torch's channels-last rules: dense channels-last, a stepped slice
# of one (channels-last strides, not contiguous), row-major, a size-1 C whose stride is
# anything, an empty tensor with channels-last strides and one with a size-0 H.
_FORMAT_INPUTS = {
    "channels_last": ((2, 3, 4, 5), (60, 1, 15, 3), 0),
    "channels_last_stepped": ((2, 3, 2, 5), (60, 1, 30, 3), 3),
    "row_major": ((2, 3, 4, 5), (60, 20, 5, 1), 0),
    "size1_c_odd_stride": ((2, 1, 4, 5), (20, 7, 5, 1), 0),
    "size1_hw": ((2, 3, 1, 1), (3, 1, 3, 3), 0),
    "n111_ambiguous": ((2, 1, 1, 1), (1, 1, 1, 1), 0),
    "empty_channels_last": ((0, 3, 4, 5), (60, 1, 15, 3), 0),
    "empty_h_channels_last": ((2, 3, 0, 5), (15, 1, 15, 3), 0),
}

_FORMAT_PROGRAMS = {
    "contiguous_cl": lambda x: x.contiguous(memory_format=torch.channels_last),
    "contiguous": lambda x: x.contiguous(),
    "to_cl": lambda x: x.to(memory_format=torch.channels_last),
    "to_contiguous_format": lambda x: x.to(memory_format=torch.contiguous_format),
    "clone_cl": lambda x: x.clone(memory_format=torch.channels_last),
    "to_half_cl": lambda x: x.to(torch.float16, memory_format=torch.channels_last),
    "to_copy": lambda x: x.to(torch.float32, copy=True),
    "permuted_contiguous_cl": lambda x: x.permute(0, 1, 3, 2).contiguous(
        memory_format=torch.channels_last),
}


@pytest.mark.parametrize("backend", ("interpret", "cpu", "reference"))
@pytest.mark.parametrize("layout", sorted(_FORMAT_INPUTS))
@pytest.mark.parametrize("program", sorted(_FORMAT_PROGRAMS))
def test_memory_format_results_alias_exactly_where_torchs_do(program: str, layout: str,
                                                             backend: str) -> None:
    """`contiguous(memory_format=torch.channels_last)` used to copy always; torch hands
    the tensor back where it is channels-last contiguous (`is_contiguous(memory_format=
    ...)`, size-1 dims' strides not counting), `.to(memory_format=...)` where torch
    suggests that format for its strides (a stepped channels-last slice too; a transposed
    tensor for `contiguous_format`), and `.to(copy=True)` never. Traced, the graph is
    specialized to each caller's strides."""
    fn = _FORMAT_PROGRAMS[program]
    x = _strided(*_FORMAT_INPUTS[layout])
    graph = stridec.trace(fn, torch.empty(x.shape))
    run = stridec.run_reference if backend == "reference" else stridec.compile(graph,
                                                                             backend=backend)
    got = run(graph, x) if backend == "reference" else run(x)
    check_against_torch(got, (fn(x),), (x,))


@pytest.mark.parametrize("backend", ("interpret", "cpu", "reference"))
def test_memory_formats_in_the_builder_and_in_rank_5(backend: str) -> None:
    """The builder's `contiguous`/`to`/`clone` take memory formats by name as trace takes
    torch's; channels_last_3d follows the same rules on rank 5."""
    x5 = torch.randn(2, 3, 2, 2, 4).contiguous(memory_format=torch.channels_last_3d)
    g = stridec.Graph("formats")
    v = g.input("x", tuple(x5.shape), "float32")
    g.output(v.contiguous("channels_last_3d"), v.to(memory_format="channels_last_3d"),
             v.clone("channels_last_3d"), v.contiguous(), v[:, :, :, :, ::2].contiguous(
                 memory_format="channels_last_3d"))
    got = (stridec.run_reference(g, x5) if backend == "reference"
           else stridec.compile(g, backend=backend)(x5))
    cl3 = torch.channels_last_3d
    want = (x5.contiguous(memory_format=cl3), x5.to(memory_format=cl3),
            x5.clone(memory_format=cl3), x5.contiguous(),
            x5[:, :, :, :, ::2].contiguous(memory_format=cl3))
    check_against_torch(got, want, (x5,))


def test_memory_format_errors_name_the_call() -> None:
    g = stridec.Graph("formats")
    v = g.input("x", (2, 3, 4), "float32")
    with pytest.raises(ShapeError, match="channels_last needs a tensor of rank 4"):
        v.contiguous("channels_last")
    with pytest.raises(stridec.errors.VerificationError, match="preserve_format"):
        v.contiguous("preserve_format")
    with pytest.raises(stridec.errors.VerificationError, match="memory_format"):
        v.contiguous("nhwc")


# --------------------------------------------------------------------------- output layouts
# Ops whose result layout is torch's own rule, found by comparing traced programs with torch
# on channels-last, transposed, stepped, expanded and empty inputs.


def _traced_like_torch(fn, *xs: torch.Tensor) -> None:
    """`fn` traced on row-major examples, called on `xs` on every CPU backend: values,
    strides, offset and storage shared as torch's."""
    graph = stridec.trace(fn, *(torch.zeros(x.shape, dtype=x.dtype) for x in xs))
    want = fn(*xs)
    for backend in ("interpret", "cpu", "reference"):
        got = stridec.compile(graph, backend=backend)(*xs)
        check_against_torch(got, want, xs)


def _channels_last(*sizes: int) -> torch.Tensor:
    return torch.arange(float(math.prod(sizes))).reshape(sizes).contiguous(
        memory_format=torch.channels_last)


def test_pixel_shuffle_of_channels_last_is_channels_last() -> None:
    """`F.pixel_shuffle(x, 2)` of a channels-last x came back row-major; torch lays the
    result out in the format it suggests for x (also for factor 1 and a stepped slice)."""
    x = _channels_last(2, 8, 3, 4)
    _traced_like_torch(lambda t: (F.pixel_shuffle(t, 2), F.pixel_shuffle(t, 1),
                                  F.pixel_unshuffle(t[:, :, 1:], 1)), x)
    _traced_like_torch(lambda t: F.pixel_unshuffle(t, 2), _channels_last(2, 3, 4, 6))
    _traced_like_torch(lambda t: F.pixel_shuffle(t, 2), _channels_last(1, 8, 6, 4)[:, :, ::2])
    _traced_like_torch(lambda t: F.pixel_shuffle(t, 2), torch.randn(3, 2, 8, 3, 2))  # rank 5


def test_pixel_unshuffle_of_an_empty_tensor_is_its_clone() -> None:
    """torch's pixel_unshuffle hands back a clone of an empty input, of the input's sizes
    (pixel_shuffle does not); stridec made the unshuffled sizes."""
    _traced_like_torch(lambda t: F.pixel_unshuffle(t, 2), torch.zeros(1, 1, 2, 0, 4))
    _traced_like_torch(lambda t: F.pixel_shuffle(t, 2), torch.zeros(0, 4, 2, 2))


def test_pixel_shuffle_of_channels_last_3d_is_refused_as_torch_does() -> None:
    x = torch.randn(2, 2, 8, 2, 2).contiguous(memory_format=torch.channels_last_3d)
    with pytest.raises(RuntimeError):
        F.pixel_shuffle(x, 2)
    graph = stridec.trace(lambda t: F.pixel_shuffle(t, 2), torch.zeros(x.shape))
    with pytest.raises(stridec.StridecError, match="channels_last_3d"):
        stridec.compile(graph, backend="interpret")(x)


def test_like_factories_keep_the_inputs_strides() -> None:
    """`torch.zeros_like(x)` (`ones_like`, `full_like`) of a transposed or channels-last x
    came back row-major; torch's `empty_like` keeps the strides (`preserve_format`) and
    takes a `memory_format`."""
    fn = lambda t: (torch.zeros_like(t), torch.ones_like(t, dtype=torch.int8),  # noqa: E731
                    torch.full_like(t, 2.5), torch.ones_like(t, memory_format=torch.channels_last),
                    torch.zeros_like(t, memory_format=torch.contiguous_format))
    _traced_like_torch(fn, _channels_last(2, 3, 2, 4))
    _traced_like_torch(fn, torch.randn(4, 2, 3, 2).transpose(1, 3))
    _traced_like_torch(fn, torch.randn(2, 1, 1, 3).expand(2, 3, 4, 3))
    _traced_like_torch(fn, _channels_last(2, 3, 4, 6)[:, :, ::2, 1:])


def test_stack_of_channels_last_tensors_keeps_their_format() -> None:
    """torch.stack along a dim before the last is a cat then a view (channels-last stays);
    stridec cat the unsqueezed tensors, row-major."""
    x = _channels_last(2, 3, 2, 4)
    _traced_like_torch(lambda t: tuple(torch.stack([t, t], d) for d in range(5)), x)
    _traced_like_torch(lambda t: torch.stack([t], 1), x)


def test_roll_is_a_cat_per_dim_as_torch_does() -> None:
    """A shift of 0 on one of several dims still cats (a whole dim and an empty piece),
    which makes torch's result row-major; an empty tensor's roll is its clone."""
    x = _channels_last(2, 2, 1, 4)
    _traced_like_torch(lambda t: (t.roll((2, 1), (2, 0)), t.roll(1, 1), t.roll(0, 1),
                                  t.roll(3)), x)
    _traced_like_torch(lambda t: t.roll(1, 2), torch.zeros(2, 3, 0).transpose(0, 2))


def test_a_crop_to_nothing_of_channels_last_keeps_torchs_strides() -> None:
    """`F.pad` cropping a dim of a channels-last tensor to size 0: torch's channels-last
    strides multiply by the 0 (N stride 0); stridec counted it as 1."""
    _traced_like_torch(lambda t: F.pad(t, [-1, -1, -1, 2, -1, 1]),
                       torch.zeros(2, 1, 3, 2).as_strided((2, 1, 3, 2), (6, 1, 2, 1)))
    _traced_like_torch(lambda t: F.pad(t, [-1, -1, 0, 1]), _channels_last(2, 3, 4, 2))


def test_what_torch_takes_is_not_refused() -> None:
    """`repeat` of a rank-5 tensor (its interleaved reshape passed the rank limit) and
    `flip` of a scalar along dim 0 were refused; torch takes both."""
    x = torch.randn(2, 3, 1, 2, 2)
    _traced_like_torch(lambda t: (t.repeat(2, 1, 1, 1, 2), t.repeat(1, 2, 3, 1, 1, 1),
                                  t.repeat(1, 0, 1, 1, 1), t[0, 0, 0, 0, 0].flip(0)), x)


# ------------------------------------------------- pipelines without fold-views (any order)

PIPELINE_WITHOUT_FOLDING = (
    "canonicalize,lower-formats,fuse-copies,eliminate-copies,dce,cse,plan-memory,merge-fills")


@pytest.mark.parametrize("backend", ["cpu", "interpret", "reference"])
def test_a_clone_returned_through_unfolded_views_stays_new_memory(backend: str) -> None:
    """Found by the random-pipeline fuzzer: without fold-views, `clone` then `as_strided`
    then `select` reached the output through a view eliminate-copies did not follow, so the
    clone was dropped and the result shared the input's storage; torch's does not."""
    g = stridec.Graph("clone_select")
    x = g.input("x", (3, 4), "float32")
    g.output(x.clone().as_strided([1], [0], 0)[0])
    t = torch.randn(3, 4)
    got = stridec.compile(g, backend=backend, pipeline=PIPELINE_WITHOUT_FOLDING)(t)
    check_against_torch(got, t.clone().as_strided([1], [0], 0)[0], (t,))


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_eliminating_a_copy_under_unfolded_views_keeps_the_ir_valid(backend: str) -> None:
    """Found by the random-pipeline fuzzer: eliminate-copies moved an `as_strided` of a
    clone onto the clone's source (offset 3) while a `select` of it kept its old type, and
    the IR no longer verified (an InternalError). An unfolded view now keeps the copy."""
    g = stridec.Graph("clone_at_offset")
    x = g.input("x", (11, 1, 1, 1), "float32")
    g.output(x.clone().as_strided([2], [2], 0)[-2])
    t = torch.randn(15).as_strided((11, 1, 1, 1), (1, 1, 1, 1), 3)
    pipeline = "merge-fills,fuse-copies,dce,lower-formats,plan-memory,dce,eliminate-copies"
    got = stridec.compile(g, backend=backend, pipeline=pipeline)(t)
    check_against_torch(got, t.clone().as_strided([2], [2], 0)[-2], (t,))


# --------------------------------------------------------------------------- in-place writes


def test_an_out_call_of_a_buffer_read_between_two_writes() -> None:
    """A graph-made buffer written (zeros), read by a cat, written again (x): with out=,
    the cat reads the zeros and the second out holds x, as torch's in-place ops give.
    fuse-copies cut the out copy of the cat into pieces reading the buffer where the out
    copy ran, after the second write (an InternalError: the IR did not verify)."""
    g = stridec.Graph("two_writes")
    x = g.input("x", (17,), "float32")
    buffer = x.clone()
    first = buffer.fill_(0.0)
    both = stridec.ir.builder.cat([first, first], 0)
    second = first.copy_(x)
    g.output(both, second)
    t = torch.randn(17)
    want = (torch.zeros(34), t.clone())
    outs = (torch.empty(34), torch.empty(17))
    stridec.compile(g, backend="cpu")(t, out=outs)
    assert torch.equal(outs[0], want[0]) and torch.equal(outs[1], want[1])


READS = ["cat_returned_flipped", "cat_flipped_after", "transposed_after", "strided"]
WRITES = ["whole", "through_a_view"]


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("read", READS)
def test_a_view_read_between_two_writes_reads_the_first(
    backend: str, read: str, write: str
) -> None:
    """A buffer written (fill_ 2), read through views, written again (copy_ of x, whole or
    rows 1: through a view): what was read holds the first write's values, as torch's
    in-place ops give, wherever the copy of the read lands (before the second write, after
    it, or at the end, where the returned view is made contiguous) and whichever rewrite
    it takes (fused with one copy, cut into pieces per writer of a cat)."""
    def make(buffer, x, cat, memory):  # the graph's ops and torch's, one spelling
        first = buffer.fill_(2.0)
        if read == "cat_returned_flipped":
            got = cat([first, first], 0).flip(0)
        elif read == "strided":
            got = first[:, ::2].contiguous()
        else:
            got = cat([first, first], 0) if read == "cat_flipped_after" else first.t().contiguous()
        if write == "whole":
            second = first.copy_(x)
        else:
            second = memory(first[1:].copy_(x[1:]), first)
        if read == "cat_flipped_after":
            got = got.flip(0).contiguous()
        elif read == "transposed_after":
            got = got.t().contiguous()
        return got, second

    g = stridec.Graph("view_read_between_writes")
    x = g.input("x", (3, 4), "float32")
    g.output(*make(x.clone(), x, stridec.ir.builder.cat, lambda row, _: row.root()))
    t = torch.randn(3, 4)
    want = make(t.clone(), t, torch.cat, lambda _, whole: whole)
    got = stridec.compile(g, backend=backend)(t)
    check_against_torch(got, want, (t,))


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_random_values_written_into_an_input_read_before(backend: str) -> None:
    """`y = x.clone(); x.copy_(uniform)` with the generator made first: fuse-copies placed
    the generator into x at the generator's place, ahead of the clone that reads x (an
    InternalError); the clone holds x's values from before the write."""
    g = stridec.Graph("philox_into_a_read_input")
    s = g.input("state", (6,), "int32")
    x = g.input("x", (8,), "float32")
    u, _ = g.philox_uniform(s, (8,))
    g.output(x.clone(), x.copy_(u))
    words = torch.tensor([5, 0, 0, 0, 0x12345678, 0x1ABCDEF0], dtype=torch.int32)
    t = torch.randn(8)
    before = t.clone()
    want_u = stridec.compile(g, backend="reference")(words, torch.empty(8))[1]
    got = stridec.compile(g, backend=backend)(words, t)
    assert torch.equal(got[0], before) and torch.equal(got[1], want_u)
    assert got[1].data_ptr() == t.data_ptr() and torch.equal(t, want_u)
