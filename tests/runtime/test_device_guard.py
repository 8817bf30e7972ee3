"""Every single-kernel launch (`launch_copy`, `launch_copy_batch`, `launch_philox`) runs
on its tensors' CUDA device: Triton launches on the current device, so a kernel over
tensors on cuda:1 while cuda:0 is current would get another GPU's pointers.

Without a second GPU the test stands torch.cuda's current device in with a stand-in and
the tensors with fake ones on cuda:1 (sizes, strides and device, no memory), and records
which device is current when each kernel is launched."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from stridec.compiler.codegen.batch import generate_copy_batch
from stridec.compiler.codegen.copy import generate_copy
from stridec.compiler.codegen.philox import PhiloxSpec, generate_philox
from stridec.compiler.codegen.spec import CopySpec
from stridec.ir.dtypes import DTYPES
from stridec.runtime import launch

F32, U32 = DTYPES["float32"], DTYPES["uint32"]


class _CudaState:
    """torch.cuda's current device, as `current_device` and `device(...)` change it."""

    def __init__(self, current: int) -> None:
        self.current = current
        self.launched: list[tuple[str, int]] = []

    def current_device(self) -> int:
        return self.current

    @contextlib.contextmanager
    def device(self, device: Any) -> Iterator[None]:
        before, self.current = self.current, torch.device(device).index
        try:
            yield
        finally:
            self.current = before

    def launcher(self, kernel: Any, what: str, device: torch.device) -> Any:
        def launch_it(grid: tuple[int, ...], *args: Any, **keywords: Any) -> None:
            self.launched.append((kernel.name, self.current))
        return launch_it


@pytest.fixture(params=[0, 1], ids=["cuda0-current", "cuda1-current"])
def cuda(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> _CudaState:
    state = _CudaState(request.param)
    monkeypatch.setattr(torch.cuda, "current_device", state.current_device)
    monkeypatch.setattr(torch.cuda, "device", state.device)
    monkeypatch.setattr(launch, "_launcher", state.launcher)
    monkeypatch.setattr(launch, "_overlap", lambda a, b: False)  # fake tensors: no pointers
    return state


def _on_cuda1(n: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(n, dtype=dtype, device="cuda:1")


def test_each_single_kernel_launches_on_its_tensors_device(cuda: _CudaState) -> None:
    before = cuda.current
    copy = generate_copy(CopySpec((4, 3), (3, 1), 0, (1, 4), 0, F32, F32), "cuda")
    batch = generate_copy_batch([CopySpec((2, 3), (3, 1), 0, (6, 1), 0, F32, F32),
                                 CopySpec((2, 3), (3, 1), 0, (6, 1), 3, F32, F32)], "cuda")
    philox = generate_philox(PhiloxSpec((8,), (1,), 0, (1,), 0, 8, U32), "cuda")
    with FakeTensorMode():
        launch.launch_copy(copy, _on_cuda1(12, torch.float32), _on_cuda1(12, torch.float32))
        launch.launch_copy_batch(batch, _on_cuda1(12, torch.float32),
                                 _on_cuda1(6, torch.float32), _on_cuda1(6, torch.float32))
        launch.launch_philox(philox, _on_cuda1(6, torch.int32), _on_cuda1(8, torch.uint32),
                             _on_cuda1(6, torch.int32))
    assert [name for name, _ in cuda.launched] == [copy.name, batch.name, philox.name]
    assert [device for _, device in cuda.launched] == [1, 1, 1]
    assert cuda.current == before  # the caller's device is current again


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_single_kernels_on_the_second_gpu_while_the_first_is_current() -> None:
    copy = generate_copy(CopySpec((64, 48), (48, 1), 0, (1, 64), 0, F32, F32), "cuda")
    philox = generate_philox(PhiloxSpec((1000,), (1,), 0, (1,), 0, 1000, U32), "cuda")
    with torch.cuda.device(0):
        src = torch.randn(64 * 48, device="cuda:1")
        dst = torch.full((64 * 48,), float("nan"), device="cuda:1")
        launch.launch_copy(copy, src, dst)
        assert torch.equal(dst.view(48, 64), src.view(64, 48).t())
        state = torch.tensor([1, 2, 3, 4, 5, 6], dtype=torch.int32)
        on_cpu = torch.empty(1000, dtype=torch.uint32)
        from stridec.compiler.codegen.c.philox import generate_c_philox

        launch.launch_philox(generate_c_philox(PhiloxSpec((1000,), (1,), 0, (1,), 0, 1000, U32)),
                             state, on_cpu, torch.empty(6, dtype=torch.int32))
        bits = torch.empty(1000, dtype=torch.uint32, device="cuda:1")
        launch.launch_philox(philox, state.cuda(1), bits, torch.empty(6, dtype=torch.int32,
                                                                      device="cuda:1"))
        assert torch.equal(bits.cpu(), on_cpu)
        assert torch.cuda.current_device() == 0
