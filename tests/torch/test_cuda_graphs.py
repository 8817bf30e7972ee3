"""stridec calls inside a CUDA graph: captured once (after warm-up calls, which compile),
then replayed, as torch's own ops are. A copy (a fresh output from the graph's pool, an
`out=` and the torch op) replayed over new input values, and Philox advancing its state in
place, so that each replay draws the next numbers. GPU only."""

from __future__ import annotations

import pytest
import torch

import stridec
from stridec.runtime.backends.reference_philox import make_state

pytestmark = pytest.mark.gpu


def _warm_up(call, times: int = 3) -> None:
    """Calls on a side stream before a capture (torch's recipe): compiling, caching."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(times):
            call()
    torch.cuda.current_stream().wait_stream(side)


def test_a_copy_captured_and_replayed() -> None:
    g = stridec.Graph("graph_copy")
    g.output(g.input("x", (64, 48), "float16").t().contiguous())
    fn = stridec.compile(g)
    op = stridec.compile(g).as_torch_op("stridec_cuda_graphs::transpose")
    x = torch.randn(64, 48, device="cuda", dtype=torch.float16)
    out = torch.empty(48, 64, device="cuda", dtype=torch.float16)
    _warm_up(lambda: (fn(x, out=out), fn(x), op(x)))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(x, out=out)
        fresh = fn(x)
        from_op = op(x)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        want = x.t().contiguous()
        for got in (out, fresh, from_op):
            assert torch.equal(got, want)


def test_philox_in_place_captured_and_replayed() -> None:
    """`fn(state, out=(bits, state))` captured: each replay draws from the state the last
    one left, as the reference does call after call."""
    g = stridec.Graph("graph_philox")
    s = g.input("state", (6,), "uint32")
    bits, new_state = g.philox(s, (1000, 3))
    g.output(bits, new_state)
    fn = stridec.compile(g)
    words = torch.from_numpy(make_state(2**32 - 5, 0x0123456789ABCDEF).astype("uint32"))
    state = words.cuda()
    scratch = state.clone()
    drawn = torch.empty(1000, 3, dtype=torch.uint32, device="cuda")
    _warm_up(lambda: fn(scratch, out=(drawn, scratch)))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(state, out=(drawn, state))
    assert torch.equal(state.cpu().view(torch.int32), words.view(torch.int32))  # not run yet
    ref_state = words
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        want, ref_state = stridec.run_reference(g, ref_state)
        assert torch.equal(drawn.cpu().view(torch.int32), want.view(torch.int32))
        assert torch.equal(state.cpu().view(torch.int32), ref_state.view(torch.int32))
