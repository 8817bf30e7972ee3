"""stridec.trace on real-world torch layout snippets: the traced graph, compiled, must give
exactly what the same function gives on torch tensors (the oracle), element for element,
also for example tensors with other strides; unsupported calls name themselves."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import stridec
from stridec.errors import UnsupportedError


def head_split(x):  # attention: (B, T, H*D) -> (B, H, T, D)
    B, T, C = x.shape
    return x.view(B, T, 4, C // 4).transpose(1, 2).contiguous()


def head_merge(x):  # attention: (B, H, T, D) -> (B, T, H*D)
    B, H, T, D = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, H * D)


def qkv_split(qkv):  # ViT: one projection split into q, k, v heads
    B, T, _ = qkv.shape
    q, k, v = qkv.reshape(B, T, 3, 2, -1).permute(2, 0, 3, 1, 4).unbind(0)
    return q, k.transpose(-2, -1), v


def qkv_chunk(qkv):  # GPT-2: chunk along the channels, then heads
    q, k, v = qkv.chunk(3, dim=-1)
    B, T, C = q.shape
    return tuple(t.view(B, T, 2, C // 2).transpose(1, 2) for t in (q, k, v))


def repeat_kv(k):  # Llama grouped-query attention: repeat each kv head n_rep times
    B, H, T, D = k.shape
    return k[:, :, None, :, :].expand(B, H, 3, T, D).reshape(B, H * 3, T, D)


def to_channels_last(x):
    return x.contiguous(memory_format=torch.channels_last), x.permute(0, 2, 3, 1).contiguous()


def nhwc_to_nchw(x):
    return x.permute(0, 3, 1, 2).contiguous()


def pixel_shuffle_by_hand(x, r=2):  # ESPCN sub-pixel upsampling
    B, C, H, W = x.shape
    x = x.reshape(B, C // (r * r), r, r, H, W).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(B, C // (r * r), H * r, W * r)


def pixel_shuffle_functional(x):
    return F.pixel_shuffle(x, 2), F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2)


def im2col_unfold(x):  # 3x3 convolution patches, padding 1
    B, C, H, W = x.shape
    p = F.pad(x, (1, 1, 1, 1)).unfold(2, 3, 1).unfold(3, 3, 1)  # B, C, H, W, 3, 3
    return p.permute(0, 2, 3, 1, 4, 5).reshape(B, H * W, C * 9)


def im2col_functional(x):
    return F.unfold(x, kernel_size=(2, 3), padding=1, stride=(2, 1), dilation=(1, 2))


def window_partition(x, ws=2):  # Swin transformer
    B, H, W, C = x.shape
    x = x.view(B, H // ws, ws, W // ws, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, C)


def cyclic_shift(x):  # Swin transformer shifted windows
    return torch.roll(x, shifts=(-1, -2), dims=(1, 2))


def channel_shuffle(x, groups=3):  # ShuffleNet
    B, C, H, W = x.shape
    x = x.view(B, groups, C // groups, H, W).transpose(1, 2).contiguous()
    return x.view(B, C, H, W)


def patchify(x, p=2):  # ViT patch embedding input
    B, C, H, W = x.shape
    x = x.unfold(2, p, p).unfold(3, p, p)  # B, C, H/p, W/p, p, p
    return x.permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2)


def space_to_depth(x):  # YOLOv5 Focus
    quarters = [x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]]
    return torch.cat(quarters, 1)


def rel_shift(x):  # Transformer-XL relative positional scores
    B, H, Q, K = x.shape
    padded = F.pad(x, (1, 0)).view(B, H, K + 1, Q)
    return padded[:, :, 1:].reshape(B, H, Q, K)


def frames(x):  # audio framing: overlapping windows of 4 samples, hop 2
    return x.unfold(-1, 4, 2).transpose(-1, -2).flip(-1)


def interleave(a, b):  # stack two streams and interleave them along the last dim
    return torch.stack([a, b], dim=-1).flatten(-2)


def half_swap(x):  # rotary embeddings' half swap, without the negation
    d = x.shape[-1]
    return torch.cat((x[..., d // 2 :], x[..., : d // 2]), dim=-1)


def pad_and_crop(x):  # sequence batch padded to a multiple of 4, then the first rows
    T = x.shape[1]
    y = F.pad(x, (0, 0, 0, (-T) % 4), value=-1.0)
    return y.narrow(1, 0, 4), y.to(torch.float16), y.half().unsqueeze(0).squeeze(0)


def tile_and_repeat(x):
    return x.repeat(2, 1, 3), x.repeat_interleave(2, dim=1), torch.tile(x, (2,))


def movedim_split(x):
    a, b = torch.split(x.movedim(-1, 0), [1, 2])
    return a.squeeze(0), b.flatten(), x.mT.contiguous(), x[0].T


SNIPPETS = [
    (head_split, [(2, 5, 8)]),
    (head_merge, [(2, 4, 5, 2)]),
    (qkv_split, [(2, 3, 12)]),
    (qkv_chunk, [(2, 3, 12)]),
    (repeat_kv, [(1, 2, 3, 2)]),
    (to_channels_last, [(2, 3, 4, 5)]),
    (nhwc_to_nchw, [(2, 4, 5, 3)]),
    (pixel_shuffle_by_hand, [(1, 8, 3, 2)]),
    (pixel_shuffle_functional, [(1, 8, 3, 2)]),
    (im2col_unfold, [(1, 2, 4, 3)]),
    (im2col_functional, [(2, 2, 4, 5)]),
    (window_partition, [(1, 4, 6, 3)]),
    (cyclic_shift, [(1, 4, 5, 2)]),
    (channel_shuffle, [(1, 6, 2, 2)]),
    (patchify, [(1, 3, 4, 6)]),
    (space_to_depth, [(1, 2, 4, 6)]),
    (rel_shift, [(1, 2, 3, 3)]),
    (frames, [(2, 11)]),
    (interleave, [(3, 4), (3, 4)]),
    (half_swap, [(2, 3, 6)]),
    (pad_and_crop, [(2, 5, 3)]),
    (tile_and_repeat, [(2, 3, 2)]),
    (movedim_split, [(2, 4, 3)]),
]


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _check(fn, tensors):
    graph = stridec.trace(fn, *tensors)
    got = _as_tuple(stridec.compile(graph)(*tensors))
    want = _as_tuple(fn(*tensors))
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"{fn.__name__} output {k}"
        assert torch.equal(g, w), f"{fn.__name__}: output {k} differs from torch"


@pytest.mark.parametrize("fn,sizes", SNIPPETS, ids=[f.__name__ for f, _ in SNIPPETS])
def test_snippet_matches_torch(fn, sizes):
    torch.manual_seed(0)
    _check(fn, [torch.randn(s) for s in sizes])


@pytest.mark.parametrize("fn,sizes", SNIPPETS[:8], ids=[f.__name__ for f, _ in SNIPPETS[:8]])
def test_snippet_on_strided_inputs(fn, sizes):
    """The graph traced on contiguous examples runs on transposed views of the same sizes
    (a new specialization), still equal to torch."""
    torch.manual_seed(1)
    graph = stridec.trace(fn, *[torch.randn(s) for s in sizes])
    tensors = [torch.randn(tuple(reversed(s))).permute(*reversed(range(len(s)))) for s in sizes]
    got = _as_tuple(stridec.compile(graph)(*tensors))
    want = _as_tuple(fn(*tensors))
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)


def test_input_names_and_graph():
    def to_heads(tokens, bias):
        return tokens.transpose(0, 1), bias.expand(3, 4)

    graph = stridec.trace(to_heads, torch.randn(4, 3), torch.randn(4))
    assert graph.name == "to_heads"
    assert [v.owner.attrs["name"] for v in graph.inputs] == ["tokens", "bias"]
    assert len(graph.outputs) == 2
    assert stridec.parse(str(graph)) is not None  # the traced graph round-trips as text


def test_shape_queries_are_static():
    def fn(x):
        assert x.size(-1) == 6 and x.dim() == 2 and x.numel() == 12 and len(x) == 2
        assert x.dtype == torch.float32 and x.device.type == "cpu" and x.is_contiguous()
        return x.view(x.shape[0], 2, x.size(1) // 2)

    _check(fn, [torch.randn(2, 6)])


@pytest.mark.parametrize(
    "fn,name",
    [
        (lambda x: torch.sin(x), "torch.sin"),
        (lambda x: x.sum(), "Tensor.sum"),
        (lambda x: x + 1, "Tensor.__add__"),
        (lambda x: x * x, "Tensor.__mul__"),
        (lambda x: x[torch.tensor([0, 1])], "Tensor.__getitem__"),
        (lambda x: F.pad(x, (1, 1), mode="reflect"), "torch.nn.functional.pad(mode='reflect')"),
        (lambda x: torch.cat([x, torch.zeros(2, 3)]), "torch.cat"),
        (lambda x: F.relu(x), "torch.nn.functional.relu"),
        (lambda x: x.to("meta"), "Tensor.to(device='meta')"),
    ],
)
def test_unsupported_call_is_named(fn, name):
    with pytest.raises(UnsupportedError, match=re.escape(f"stridec.trace: {name}")):
        stridec.trace(fn, torch.randn(2, 3))


def test_bad_example_and_result():
    with pytest.raises(stridec.CallError, match="argument 'x'"):
        stridec.trace(lambda x: x, [1, 2])
    with pytest.raises(stridec.CallError, match="result 0 is int"):
        stridec.trace(lambda x: 3, torch.randn(2))
    with pytest.raises(stridec.LayoutError):
        stridec.trace(lambda x: x.permute(0, 0), torch.randn(2, 2))
