"""The rows of the copy suites (`bench/run.py --cpu --suite ttc|models|random|symbolic`):
each a torch function, written as its source writes it, with its inputs; stridec runs the
graph `stridec.trace` records from that function, torch eager and torch.compile run the
function (or its preallocated form, `into`). `bench/suites.py` measures them.

- **ttc**: the tensor transpositions of the HPTT benchmark (Springer, Su, Bientinesi,
  "HPTT: a high-performance tensor transposition C++ library", 2017;
  `springer13/hptt`, `benchmark/benchmark.sh`), whose permutations are those of the TTC
  benchmark (`HPAC/TTC`, `benchmark/benchmark.py`, `_permutations`): ranks 2-6, three
  sizes each (balanced, skewed in dim 0, skewed in the output's first dim), 57 rows.
  HPTT writes sizes and permutations column-major (dim 0 has stride 1, output dim i is
  input dim perm[i]); in torch's row-major terms the input has the sizes reversed and the
  output is `x.permute(q)` with `q[k] = d-1-perm[d-1-k]`. The published tensors are about
  200 MiB of float32; here every extent is scaled by one factor per row, so each tensor
  is about `TTC_BYTES` in float32 and in float64 alike, each extent rounded to the
  nearest integer of its own parity (odd stays odd, even stays even).
- **models**: layout code of models as their sources write it (Swin, MAE's ViT, YOLOv5,
  TResNet, ShuffleNetV2, LLaMA, Hugging Face's attention and caches, einops), at 64 KiB,
  1 MiB and 64 MiB (the row's largest tensor).
- **random**: random permutations of rank 2-6, random odd extents, element sizes 1, 2, 4
  and 8 bytes, tensors from 64 KiB to 64 MiB; one seed draws them all.
- **symbolic**: roll + window partition, im2col (`F.unfold`) and repeat_kv traced with a
  symbolic batch and with static sizes, run at the same size.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

__all__ = [
    "HPTT_BENCHMARK",
    "MODEL_SIZES",
    "SUITES",
    "TTC_BYTES",
    "Case",
    "cases",
    "hptt_to_torch",
    "scale_extents",
]

SUITES = ("ttc", "models", "random", "symbolic")
KiB, MiB = 1 << 10, 1 << 20
TTC_BYTES = 72 * 10**6  # a TTC tensor: 50-100 MB on the 2-core test machine
TTC_SMOKE_BYTES = 16 * KiB
MODEL_SIZES = {"64K": 64 * KiB, "1M": MiB, "64M": 64 * MiB}
Tensors = Sequence[torch.Tensor]


@dataclass(frozen=True)
class Case:
    """One row. `fn(*inputs)` is the code as its source writes it: the oracle, what
    `stridec.trace` records (with `dynamic`, for a symbolic row) and, where `into` is
    None, what eager and torch.compile time; `into(outs, *inputs)` writes the same result
    into preallocated `outs` as a torch user would (`out.copy_(view)`, `torch.cat(...,
    out=)`), and then every system writes into one set of outputs laid out as eager's.
    `mutates`: `fn` writes into its first input and returns it (a cache update)."""

    name: str
    suite: str
    description: str
    dtype: str
    fn: Callable[..., Any]
    make_inputs: Callable[[torch.Generator], list[torch.Tensor]]
    shape_text: str
    into: Callable[..., None] | None = None
    mutates: bool = False
    group: str = ""
    size: str = ""
    source: str = ""
    note: str = ""
    dynamic: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    def inputs(self, seed: int = 0) -> list[torch.Tensor]:
        return self.make_inputs(torch.Generator().manual_seed(seed))

    def bytes_moved(self, inputs: Tensors, outputs: Tensors) -> tuple[int, int]:
        """(read, written): every input read once, every output written once; a cache
        update reads and writes only the new entries (its second input)."""
        if self.mutates:
            new = _nbytes(inputs[1])
            return new, new
        return sum(_nbytes(t) for t in inputs), sum(_nbytes(t) for t in outputs)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def random_tensor(sizes: Sequence[int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random data (never zeros): normal floats, integers over the type's whole range."""
    if dtype.is_floating_point:
        return torch.randn(tuple(sizes), generator=gen).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, tuple(sizes), dtype=dtype, generator=gen)


def _dims(sizes: Sequence[int]) -> str:
    return "x".join(map(str, sizes))


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --------------------------------------------------------------------------- ttc

# (perm, sizes) as `benchmark.exe <dim> <perm> <sizes>` in springer13/hptt's
# benchmark/benchmark.sh: column-major, output dim i is input dim perm[i].
HPTT_BENCHMARK: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((1, 0), (7264, 7264)), ((1, 0), (43408, 1216)), ((1, 0), (1216, 43408)),
    ((0, 2, 1), (368, 384, 384)), ((0, 2, 1), (2144, 64, 384)), ((0, 2, 1), (368, 64, 2307)),
    ((1, 0, 2), (384, 384, 355)), ((1, 0, 2), (2320, 384, 59)), ((1, 0, 2), (384, 2320, 59)),
    ((2, 1, 0), (384, 355, 384)), ((2, 1, 0), (2320, 59, 384)), ((2, 1, 0), (384, 59, 2320)),
    ((0, 3, 2, 1), (80, 96, 75, 96)), ((0, 3, 2, 1), (464, 16, 75, 96)),
    ((0, 3, 2, 1), (80, 16, 75, 582)),
    ((2, 1, 3, 0), (96, 75, 96, 75)), ((2, 1, 3, 0), (608, 12, 96, 75)),
    ((2, 1, 3, 0), (96, 12, 608, 75)),
    ((2, 0, 3, 1), (96, 75, 96, 75)), ((2, 0, 3, 1), (608, 12, 96, 75)),
    ((2, 0, 3, 1), (96, 12, 608, 75)),
    ((1, 0, 3, 2), (96, 96, 75, 75)), ((1, 0, 3, 2), (608, 96, 12, 75)),
    ((1, 0, 3, 2), (96, 608, 12, 75)),
    ((3, 2, 1, 0), (96, 75, 75, 96)), ((3, 2, 1, 0), (608, 12, 75, 96)),
    ((3, 2, 1, 0), (96, 12, 75, 608)),
    ((0, 4, 2, 1, 3), (32, 48, 28, 28, 48)), ((0, 4, 2, 1, 3), (176, 8, 28, 28, 48)),
    ((0, 4, 2, 1, 3), (32, 8, 28, 28, 298)),
    ((3, 2, 1, 4, 0), (48, 28, 28, 48, 28)), ((3, 2, 1, 4, 0), (352, 4, 28, 48, 28)),
    ((3, 2, 1, 4, 0), (48, 4, 28, 352, 28)),
    ((2, 0, 4, 1, 3), (48, 28, 48, 28, 28)), ((2, 0, 4, 1, 3), (352, 4, 48, 28, 28)),
    ((2, 0, 4, 1, 3), (48, 4, 352, 28, 28)),
    ((1, 3, 0, 4, 2), (48, 48, 28, 28, 28)), ((1, 3, 0, 4, 2), (352, 48, 4, 28, 28)),
    ((1, 3, 0, 4, 2), (48, 352, 4, 28, 28)),
    ((4, 3, 2, 1, 0), (48, 28, 28, 28, 48)), ((4, 3, 2, 1, 0), (352, 4, 28, 28, 48)),
    ((4, 3, 2, 1, 0), (48, 4, 28, 28, 352)),
    ((0, 3, 2, 5, 4, 1), (16, 32, 15, 32, 15, 15)), ((0, 3, 2, 5, 4, 1), (48, 10, 15, 32, 15, 15)),
    ((0, 3, 2, 5, 4, 1), (16, 10, 15, 103, 15, 15)),
    ((3, 2, 0, 5, 1, 4), (32, 15, 15, 32, 15, 15)), ((3, 2, 0, 5, 1, 4), (112, 5, 15, 32, 15, 15)),
    ((3, 2, 0, 5, 1, 4), (32, 5, 15, 112, 15, 15)),
    ((2, 0, 4, 1, 5, 3), (32, 15, 32, 15, 15, 15)), ((2, 0, 4, 1, 5, 3), (112, 5, 32, 15, 15, 15)),
    ((2, 0, 4, 1, 5, 3), (32, 5, 112, 15, 15, 15)),
    ((3, 2, 5, 1, 0, 4), (32, 15, 15, 32, 15, 15)), ((3, 2, 5, 1, 0, 4), (112, 5, 15, 32, 15, 15)),
    ((3, 2, 5, 1, 0, 4), (32, 5, 15, 112, 15, 15)),
    ((5, 4, 3, 2, 1, 0), (32, 15, 15, 15, 15, 32)), ((5, 4, 3, 2, 1, 0), (112, 5, 15, 15, 15, 32)),
    ((5, 4, 3, 2, 1, 0), (32, 5, 15, 15, 15, 112)),
)


def hptt_to_torch(perm: Sequence[int], sizes: Sequence[int]) -> tuple[tuple[int, ...],
                                                                     tuple[int, ...]]:
    """HPTT's column-major (perm, sizes) as torch's (permutation, input shape): the input
    is `sizes` reversed; output dim k is HPTT's output dim d-1-k, which is HPTT's input dim
    perm[d-1-k], which is torch's input dim d-1-perm[d-1-k]."""
    d = len(perm)
    return tuple(d - 1 - perm[d - 1 - k] for k in range(d)), tuple(reversed(sizes))


def _round_parity(value: float, parity: int) -> int:
    """The integer nearest `value` whose parity is `parity` (ties up), at least 1 or 2."""
    k = math.floor((value - parity) / 2 + 0.5)
    return max(2 * k + parity, 2 - parity)


def _fit_largest(sizes: Sequence[int], element_size: int, target_bytes: int) -> tuple[int, ...]:
    """`sizes` with the largest extent set (keeping its parity) so that the tensor is as
    near `target_bytes` as extents of that parity allow: the finest knob there is."""
    sizes = list(sizes)
    k = sizes.index(max(sizes))
    rest = math.prod(sizes[:k] + sizes[k + 1:]) * element_size
    sizes[k] = _round_parity(target_bytes / rest, sizes[k] % 2)
    return tuple(sizes)


def scale_extents(sizes: Sequence[int], element_size: int, target_bytes: int) -> tuple[int, ...]:
    """`sizes` scaled evenly (one factor for every extent) to about `target_bytes`, each
    extent rounded to the nearest of its own parity; small extents round coarsely (5 x 0.74
    is 3 or 5), so where that leaves the tensor off the target by over 20 % the largest
    extent takes up the difference."""
    factor = (target_bytes / (math.prod(sizes) * element_size)) ** (1 / len(sizes))
    scaled = tuple(_round_parity(n * factor, n % 2) for n in sizes)
    if 0.8 <= math.prod(scaled) * element_size / target_bytes <= 1.2:
        return scaled
    return _fit_largest(scaled, element_size, target_bytes)


def _permute_case(name: str, suite: str, perm: tuple[int, ...], shape: tuple[int, ...],
                  dtype: torch.dtype, description: str, **extra: Any) -> Case:
    def permuted(x: torch.Tensor) -> torch.Tensor:
        return x.permute(perm).contiguous()

    def into(outs: Tensors, x: torch.Tensor) -> None:
        outs[0].copy_(x.permute(perm))

    return Case(name=name, suite=suite, description=description, dtype=_dtype_name(dtype),
                fn=permuted, into=into,
                make_inputs=lambda gen: [random_tensor(shape, dtype, gen)],
                shape_text=_dims(shape), **extra)


def ttc_cases(smoke: bool = False) -> list[Case]:
    """Every HPTT benchmark row in float32 and float64, scaled to `TTC_BYTES` a tensor
    (smoke: to `TTC_SMOKE_BYTES`, each permutation's balanced size in float32 and its first
    skewed size in float64)."""
    rows = []
    for dtype in (torch.float32, torch.float64):
        esize = dtype.itemsize
        for k, (perm, published) in enumerate(HPTT_BENCHMARK):
            if smoke and k % 3 != (0 if dtype == torch.float32 else 1):
                continue  # smoke: each permutation once in each dtype
            sizes = scale_extents(published, esize, TTC_SMOKE_BYTES if smoke else TTC_BYTES)
            q, shape = hptt_to_torch(perm, sizes)
            hptt = "".join(map(str, perm))
            name = f"ttc_{hptt}_{_dims(published)}_{_dtype_name(dtype)}"
            rows.append(_permute_case(
                name, "ttc", q, shape, dtype,
                f"x.permute({', '.join(map(str, q))}); HPTT perm {','.join(map(str, perm))} "
                f"on {_dims(published)} (column-major) scaled to {_dims(sizes)}",
                group=f"ttc_{hptt}", source="springer13/hptt benchmark/benchmark.sh",
                info={"hptt_perm": list(perm), "hptt_sizes": list(published),
                      "hptt_sizes_scaled": list(sizes), "torch_perm": list(q),
                      "torch_shape": list(shape)}))
    return rows


# --------------------------------------------------------------------------- random

RANDOM_DTYPES = {1: (torch.int8, torch.uint8), 2: (torch.float16, torch.bfloat16),
                 4: (torch.float32, torch.int32), 8: (torch.float64, torch.int64)}
RANDOM_ROWS = 32
RANDOM_SMOKE_ROWS = 12


def _odd_extents(rng: random.Random, rank: int, elements: int) -> tuple[int, ...]:
    """`rank` odd extents >= 3 whose product is about `elements`: a random split of its
    logarithm, each part rounded to the nearest odd number."""
    weights = [rng.expovariate(1.0) for _ in range(rank)]
    total = sum(weights)
    budget = math.log(max(elements, 3 ** rank))
    return tuple(max(3, _round_parity(math.exp(budget * w / total), 1)) for w in weights)


def random_cases(seed: int, count: int = RANDOM_ROWS, smoke: bool = False) -> list[Case]:
    """`count` random permutations (not the identity) of rank 2-6 over random odd extents,
    element sizes 1, 2, 4, 8; tensors of 64 KiB to 64 MiB, log-uniform (smoke: at most
    `RANDOM_SMOKE_ROWS` rows of 1 to 8 KiB)."""
    rng = random.Random(seed)
    count = min(count, RANDOM_SMOKE_ROWS) if smoke else count
    lo, hi = (KiB, 8 * KiB) if smoke else (64 * KiB, 64 * MiB)
    rows = []
    for k in range(count):
        rank = rng.randint(2, 6)
        esize = rng.choice((1, 2, 4, 8))
        dtype = rng.choice(RANDOM_DTYPES[esize])
        target = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        shape = list(_fit_largest(_odd_extents(rng, rank, round(target / esize)), esize,
                                  round(target)))
        while math.prod(shape) * esize < lo:  # at least the smallest size
            shape[shape.index(min(shape))] += 2
        perm = list(range(rank))
        while perm == sorted(perm):
            rng.shuffle(perm)
        name = f"rand{k:02d}_r{rank}_{_dtype_name(dtype)}"
        rows.append(_permute_case(
            name, "random", tuple(perm), tuple(shape), dtype,
            f"x.permute({', '.join(map(str, perm))})", group=f"rank{rank}",
            info={"seed": seed, "torch_perm": perm, "torch_shape": shape}))
    return rows


# --------------------------------------------------------------------------- models
# Each function below is the layout code as its source has it (cited in `source`);
# only what is not layout (a convolution after it, a sign flip) is left out, and said.


def window_partition(x: torch.Tensor, window_size: int = 7) -> torch.Tensor:
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)
    return windows


def window_reverse(windows: torch.Tensor, window_size: int, H: int, W: int) -> torch.Tensor:
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)
    return x


def cyclic_shift(x: torch.Tensor, shift_size: int = 3) -> torch.Tensor:
    return torch.roll(x, shifts=(-shift_size, -shift_size), dims=(1, 2))


def shifted_window_partition(x: torch.Tensor, shift_size: int = 3) -> torch.Tensor:
    shifted_x = torch.roll(x, shifts=(-shift_size, -shift_size), dims=(1, 2))
    return window_partition(shifted_x, 7)


def shifted_window_reverse(windows: torch.Tensor, H: int, W: int,
                           shift_size: int = 3) -> torch.Tensor:
    shifted_x = window_reverse(windows, 7, H, W)
    return torch.roll(shifted_x, shifts=(shift_size, shift_size), dims=(1, 2))


def patch_merging(x: torch.Tensor, H: int, W: int) -> torch.Tensor:
    B, L, C = x.shape
    x = x.view(B, H, W, C)
    x0 = x[:, 0::2, 0::2, :]  # B H/2 W/2 C
    x1 = x[:, 1::2, 0::2, :]  # B H/2 W/2 C
    x2 = x[:, 0::2, 1::2, :]  # B H/2 W/2 C
    x3 = x[:, 1::2, 1::2, :]  # B H/2 W/2 C
    x = torch.cat([x0, x1, x2, x3], -1)  # B H/2 W/2 4*C
    x = x.view(B, -1, 4 * C)  # B H/2*W/2 4*C
    return x


def mae_patchify(imgs: torch.Tensor, p: int = 16) -> torch.Tensor:
    h = w = imgs.shape[2] // p
    x = imgs.reshape(shape=(imgs.shape[0], 3, h, p, w, p))
    x = torch.einsum("nchpwq->nhwpqc", x)
    x = x.reshape(shape=(imgs.shape[0], h * w, p**2 * 3))
    return x


def patchify_permute(imgs: torch.Tensor, p: int = 16) -> torch.Tensor:
    n, c, hp, wp = imgs.shape
    h, w = hp // p, wp // p
    x = imgs.reshape(n, c, h, p, w, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(n, h * w, p * p * c)


def mae_unpatchify(x: torch.Tensor, p: int = 16) -> torch.Tensor:
    h = w = int(x.shape[1] ** 0.5)
    x = x.reshape(shape=(x.shape[0], h, w, p, p, 3))
    x = torch.einsum("nhwpqc->nchpwq", x)
    imgs = x.reshape(shape=(x.shape[0], 3, h * p, h * p))
    return imgs


def channel_shuffle(x: torch.Tensor, groups: int = 2) -> torch.Tensor:
    batchsize, num_channels, height, width = x.size()
    channels_per_group = num_channels // groups
    x = x.view(batchsize, groups, channels_per_group, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    x = x.view(batchsize, -1, height, width)
    return x


def focus(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                      x[..., 1::2, 1::2]], 1)


def space_to_depth(x: torch.Tensor, bs: int = 4) -> torch.Tensor:
    N, C, H, W = x.size()
    x = x.view(N, C, H // bs, bs, W // bs, bs)  # (N, C, H//bs, bs, W//bs, bs)
    x = x.permute(0, 3, 5, 1, 2, 4).contiguous()  # (N, bs, bs, C, H//bs, W//bs)
    x = x.view(N, C * (bs ** 2), H // bs, W // bs)  # (N, C*bs^2, H//bs, W//bs)
    return x


def einops_space_to_depth(x: torch.Tensor) -> torch.Tensor:
    from einops import rearrange

    return rearrange(x, "b c (h p1) (w p2) -> b (p1 p2 c) h w", p1=2, p2=2)


def split_heads(tensor: torch.Tensor, num_heads: int = 32) -> torch.Tensor:
    bsz, seq_len, embed = tensor.shape
    head_dim = embed // num_heads
    return tensor.view(bsz, seq_len, num_heads, head_dim).transpose(1, 2).contiguous()


def merge_heads(y: torch.Tensor) -> torch.Tensor:
    B, nh, T, hs = y.shape
    return y.transpose(1, 2).contiguous().view(B, T, nh * hs)


def rotate_half_halves(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((x2, x1), dim=-1)


def repeat_kv(hidden_states: torch.Tensor, n_rep: int = 4) -> torch.Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep,
                                                           slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def kv_cache_cat(past_key: torch.Tensor, key_states: torch.Tensor) -> torch.Tensor:
    return torch.cat([past_key, key_states], dim=-2)


def kv_cache_write(cache_k: torch.Tensor, xk: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
    bsz, seqlen = xk.shape[0], xk.shape[1]
    cache_k[:bsz, start_pos : start_pos + seqlen] = xk
    return cache_k


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous(memory_format=torch.channels_last)


def from_channels_last(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous()


def im2col(x: torch.Tensor) -> torch.Tensor:
    return F.unfold(x, kernel_size=3, padding=1)


# Sizes of each pattern's input(s) per size, as (sizes, ...) for the inputs; the row's
# largest tensor is about the size's bytes (smoke: the "tiny" entry).
@dataclass(frozen=True)
class Pattern:
    name: str
    description: str
    source: str
    dtype: torch.dtype
    shapes: dict[str, tuple[tuple[int, ...], ...]]
    fn: Callable[[tuple[tuple[int, ...], ...]], Callable[..., Any]]
    into: Callable[[tuple[tuple[int, ...], ...]], Callable[..., None] | None] = (
        lambda shapes: None)
    mutates: bool = False
    note: str = ""
    channels_last_input: bool = False


def _swin(n: int, h: int, c: int) -> tuple[tuple[int, ...], ...]:
    return ((n, h, h, c),)


def _windows(shapes: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    n, h, w, c = shapes[0]
    return ((n * (h // 7) * (w // 7), 7, 7, c),)


SWIN = {"tiny": _swin(2, 14, 3), "64K": _swin(1, 14, 96), "1M": _swin(1, 56, 96),
        "64M": _swin(56, 56, 96)}
SWIN_WINDOWS = {k: _windows(v) for k, v in SWIN.items()}
SWIN_TOKENS = {k: ((v[0][0], v[0][1] * v[0][2], v[0][3]),) for k, v in SWIN.items()}
IMAGES = {"tiny": ((2, 3, 32, 32),), "64K": ((1, 3, 80, 80),), "1M": ((2, 3, 224, 224),),
          "64M": ((112, 3, 224, 224),)}
SHUFFLE_IN = {"tiny": ((2, 16, 3, 5),), "64K": ((1, 64, 16, 16),), "1M": ((1, 64, 64, 64),),
              "64M": ((16, 64, 128, 128),)}
UNSHUFFLE_IN = {"tiny": ((2, 3, 6, 10),), "64K": ((1, 16, 32, 32),), "1M": ((1, 16, 128, 128),),
                "64M": ((4, 16, 512, 512),)}
SHUFFLENET = {"tiny": ((2, 6, 5, 3),), "64K": ((1, 116, 12, 12),), "1M": ((1, 116, 48, 48),),
              "64M": ((48, 116, 56, 56),)}
FOCUS = {"tiny": ((2, 3, 10, 14),), "64K": ((1, 3, 74, 74),), "1M": ((1, 3, 296, 296),),
         "64M": ((14, 3, 640, 640),)}
S2D = {"tiny": ((2, 3, 8, 12),), "64K": ((1, 3, 72, 76),), "1M": ((2, 3, 224, 224),),
       "64M": ((112, 3, 224, 224),)}
TOKENS = {"tiny": ((2, 5, 64),), "64K": ((1, 8, 4096),), "1M": ((1, 128, 4096),),
          "64M": ((4, 2048, 4096),)}
HEADS = {k: ((v[0][0], 32, v[0][1], v[0][2] // 32),) for k, v in TOKENS.items()}
ROPE = {"tiny": ((2, 3, 5, 16),), "64K": ((1, 32, 8, 128),), "1M": ((1, 32, 128, 128),),
        "64M": ((4, 32, 2048, 128),)}
KV = {"tiny": ((2, 2, 5, 8),), "64K": ((1, 8, 8, 128),), "1M": ((1, 8, 128, 128),),
      "64M": ((1, 8, 8192, 128),)}  # repeat_kv's output (4x) is the size
KV_CAT = {k: ((n, h, t - 1, d), (n, h, 1, d))
          for k, ((n, h, t, d),) in {"tiny": ((2, 3, 5, 8),), "64K": ((1, 32, 8, 128),),
                                     "1M": ((1, 32, 128, 128),),
                                     "64M": ((4, 32, 2048, 128),)}.items()}
# Meta's LLaMA cache (max_batch, max_seq, kv_heads, head_dim) and one prefill chunk half
# the cache's length written at `start_pos` = a quarter: the chunk is the size.
KV_WRITE = {k: ((b, 2 * t, h, d), (b, t, h, d))
            for k, (b, t, h, d) in {"tiny": (2, 4, 3, 8), "64K": (1, 32, 8, 128),
                                    "1M": (1, 512, 8, 128), "64M": (4, 8192, 8, 128)}.items()}
NCHW = {"tiny": ((2, 6, 5, 7),), "64K": ((1, 16, 32, 32),), "1M": ((1, 64, 64, 64),),
        "64M": ((80, 64, 56, 56),)}
IM2COL = {"tiny": ((2, 3, 5, 7),), "64K": ((1, 16, 11, 11),), "1M": ((1, 16, 42, 42),),
          "64M": ((8, 64, 60, 60),)}  # the output (9x the input) is the size


def _copy_view(view: Callable[..., torch.Tensor]) -> Callable[..., Callable[..., None]]:
    """`out.copy_(view(*inputs))`, the view written as the source's ops up to its copy."""
    return lambda shapes: lambda outs, *xs: outs[0].copy_(view(*xs))


def _partition_into(shapes: tuple[tuple[int, ...], ...]) -> Callable[..., None]:
    n, h, w, c = shapes[0]

    def into(outs: Tensors, x: torch.Tensor) -> None:
        outs[0].view(n, h // 7, w // 7, 7, 7, c).copy_(
            x.view(n, h // 7, 7, w // 7, 7, c).permute(0, 1, 3, 2, 4, 5))

    return into


def _reverse_into(shapes: tuple[tuple[int, ...], ...]) -> Callable[..., None]:
    n, h, w, c = SWIN_OF[shapes]

    def into(outs: Tensors, windows: torch.Tensor) -> None:
        outs[0].view(n, h // 7, 7, w // 7, 7, c).copy_(
            windows.view(n, h // 7, w // 7, 7, 7, c).permute(0, 1, 3, 2, 4, 5))

    return into


SWIN_OF = {SWIN_WINDOWS[k]: SWIN[k][0] for k in SWIN}


def _roll_into(shift: int) -> Callable[..., Callable[..., None]]:
    """`torch.roll` into preallocated memory: the four blocks of a 2-D roll, each one copy."""
    def make(shapes: tuple[tuple[int, ...], ...]) -> Callable[..., None]:
        def into(outs: Tensors, x: torch.Tensor) -> None:
            H, W = x.shape[1], x.shape[2]
            s, t = shift % H, shift % W
            out = outs[0]
            out[:, s:, t:].copy_(x[:, : H - s, : W - t])
            out[:, :s, t:].copy_(x[:, H - s :, : W - t])
            out[:, s:, :t].copy_(x[:, : H - s, W - t :])
            out[:, :s, :t].copy_(x[:, H - s :, W - t :])

        return into

    return make


def _patch_merging_into(shapes: tuple[tuple[int, ...], ...]) -> Callable[..., None]:
    b, l_, c = shapes[0]
    h = w = math.isqrt(l_)

    def into(outs: Tensors, x: torch.Tensor) -> None:
        v = x.view(b, h, w, c)
        torch.cat([v[:, 0::2, 0::2, :], v[:, 1::2, 0::2, :], v[:, 0::2, 1::2, :],
                   v[:, 1::2, 1::2, :]], -1, out=outs[0].view(b, h // 2, w // 2, 4 * c))

    return into


def _patchify_into(shapes: tuple[tuple[int, ...], ...], p: int = 16) -> Callable[..., None]:
    n, c, hp, wp = shapes[0]
    h, w = hp // p, wp // p

    def into(outs: Tensors, imgs: torch.Tensor) -> None:
        outs[0].view(n, h, w, p, p, c).copy_(
            imgs.reshape(n, c, h, p, w, p).permute(0, 2, 4, 3, 5, 1))

    return into


def _unpatchify_into(shapes: tuple[tuple[int, ...], ...], p: int = 16) -> Callable[..., None]:
    n, hw, _ = shapes[0]
    h = math.isqrt(hw)

    def into(outs: Tensors, x: torch.Tensor) -> None:
        outs[0].view(n, 3, h, p, h, p).copy_(x.view(n, h, h, p, p, 3).permute(0, 5, 1, 3, 2, 4))

    return into


def _shuffle_into(r: int) -> Callable[..., Callable[..., None]]:
    def make(shapes: tuple[tuple[int, ...], ...]) -> Callable[..., None]:
        n, cr, h, w = shapes[0]
        c = cr // (r * r)

        def into(outs: Tensors, x: torch.Tensor) -> None:
            outs[0].view(n, c, h, r, w, r).copy_(x.view(n, c, r, r, h, w).permute(0, 1, 4, 2, 5, 3))

        return into

    return make


def _unshuffle_into(r: int, order: tuple[int, ...]) -> Callable[..., Callable[..., None]]:
    """Pixel unshuffle and its relatives (channel order `order` of (c, p1, p2))."""
    def make(shapes: tuple[tuple[int, ...], ...]) -> Callable[..., None]:
        n, c, h, w = shapes[0]
        split = (c, r, r)
        out_dims = tuple(split[k] for k in order)

        def into(outs: Tensors, x: torch.Tensor) -> None:
            # x as (n, c, h/r, p1, w/r, p2): c is dim 1, p1 dim 3, p2 dim 5
            src = x.view(n, c, h // r, r, w // r, r)
            dims = {0: 1, 1: 3, 2: 5}
            outs[0].view(n, *out_dims, h // r, w // r).copy_(
                src.permute(0, *(dims[k] for k in order), 2, 4))

        return into

    return make


def _focus_into(shapes: tuple[tuple[int, ...], ...]) -> Callable[..., None]:
    def into(outs: Tensors, x: torch.Tensor) -> None:
        torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]],
                  1, out=outs[0])

    return into


def _channel_shuffle_into(shapes: tuple[tuple[int, ...], ...], groups: int = 2) -> Callable:
    n, c, h, w = shapes[0]

    def into(outs: Tensors, x: torch.Tensor) -> None:
        outs[0].view(n, c // groups, groups, h, w).copy_(
            x.view(n, groups, c // groups, h, w).transpose(1, 2))

    return into


def _s2d_into(shapes: tuple[tuple[int, ...], ...], bs: int = 4) -> Callable[..., None]:
    n, c, h, w = shapes[0]

    def into(outs: Tensors, x: torch.Tensor) -> None:
        outs[0].view(n, bs, bs, c, h // bs, w // bs).copy_(
            x.view(n, c, h // bs, bs, w // bs, bs).permute(0, 3, 5, 1, 2, 4))

    return into


def _rope_into(shapes: tuple[tuple[int, ...], ...]) -> Callable[..., None]:
    def into(outs: Tensors, x: torch.Tensor) -> None:
        half = x.shape[-1] // 2
        torch.cat((x[..., half:], x[..., :half]), dim=-1, out=outs[0])

    return into


def _repeat_kv_into(shapes: tuple[tuple[int, ...], ...], n_rep: int = 4) -> Callable[..., None]:
    b, h, t, d = shapes[0]

    def into(outs: Tensors, x: torch.Tensor) -> None:
        outs[0].view(b, h, n_rep, t, d).copy_(x[:, :, None].expand(b, h, n_rep, t, d))

    return into


def _kv_cat_into(shapes: tuple[tuple[int, ...], ...]) -> Callable[..., None]:
    return lambda outs, past, new: torch.cat([past, new], dim=-2, out=outs[0])


PATTERNS: tuple[Pattern, ...] = (
    Pattern("swin_window_partition", "Swin window_partition: view, permute(0,1,3,2,4,5), "
            "contiguous", "microsoft/Swin-Transformer models/swin_transformer.py",
            torch.float32, SWIN, lambda s: window_partition, _partition_into),
    Pattern("swin_window_reverse", "Swin window_reverse: windows back to (B, H, W, C)",
            "microsoft/Swin-Transformer models/swin_transformer.py", torch.float32,
            SWIN_WINDOWS,
            lambda s: lambda w: window_reverse(w, 7, SWIN_OF[s][1], SWIN_OF[s][2]),
            _reverse_into),
    Pattern("swin_roll", "Swin cyclic shift: torch.roll(x, (-3, -3), (1, 2))",
            "microsoft/Swin-Transformer models/swin_transformer.py", torch.float32, SWIN,
            lambda s: cyclic_shift, _roll_into(-3)),
    Pattern("swin_roll_partition", "Swin shifted windows: roll then window_partition",
            "microsoft/Swin-Transformer models/swin_transformer.py", torch.float32, SWIN,
            lambda s: shifted_window_partition),
    Pattern("swin_reverse_roll", "Swin: window_reverse then roll back (3, 3)",
            "microsoft/Swin-Transformer models/swin_transformer.py", torch.float32,
            SWIN_WINDOWS,
            lambda s: lambda w: shifted_window_reverse(w, SWIN_OF[s][1], SWIN_OF[s][2])),
    Pattern("swin_patch_merging", "Swin PatchMerging: cat of 4 stride-2 slices, view",
            "microsoft/Swin-Transformer models/swin_transformer.py", torch.float32,
            SWIN_TOKENS,
            lambda s: lambda x: patch_merging(x, math.isqrt(s[0][1]), math.isqrt(s[0][1])),
            _patch_merging_into),
    Pattern("vit_patchify_einsum", "MAE patchify: reshape, einsum nchpwq->nhwpqc, reshape",
            "facebookresearch/mae models_mae.py", torch.float32, IMAGES,
            lambda s: mae_patchify, _patchify_into),
    Pattern("vit_patchify", "ViT patchify as reshape + permute(0,2,4,3,5,1) + reshape",
            "MAE's patchify without einsum", torch.float32, IMAGES,
            lambda s: patchify_permute, _patchify_into),
    Pattern("vit_unpatchify_einsum", "MAE unpatchify: reshape, einsum nhwpqc->nchpwq",
            "facebookresearch/mae models_mae.py", torch.float32,
            {k: ((n, (h // 16) ** 2, 768),) for k, ((n, _, h, _),) in IMAGES.items()},
            lambda s: mae_unpatchify, _unpatchify_into),
    Pattern("pixel_shuffle", "F.pixel_shuffle(x, 2) (ESPCN upscaling)", "torch.nn.PixelShuffle",
            torch.float32, SHUFFLE_IN, lambda s: lambda x: F.pixel_shuffle(x, 2),
            _shuffle_into(2)),
    Pattern("pixel_unshuffle", "F.pixel_unshuffle(x, 2)", "torch.nn.PixelUnshuffle",
            torch.float32, UNSHUFFLE_IN, lambda s: lambda x: F.pixel_unshuffle(x, 2),
            _unshuffle_into(2, (0, 1, 2))),
    Pattern("einops_space_to_depth",
            "einops rearrange 'b c (h p1) (w p2) -> b (p1 p2 c) h w' (strided-conv stem)",
            "einops docs", torch.float32, UNSHUFFLE_IN,
            lambda s: einops_space_to_depth, _unshuffle_into(2, (1, 2, 0))),
    Pattern("channel_shuffle", "ShuffleNetV2 channel_shuffle, groups = 2",
            "pytorch/vision torchvision/models/shufflenetv2.py", torch.float32, SHUFFLENET,
            lambda s: channel_shuffle, _channel_shuffle_into),
    Pattern("yolov5_focus", "YOLOv5 Focus: cat of the 4 stride-2 pixel phases on C (before "
            "its conv)", "ultralytics/yolov5 models/common.py", torch.float32, FOCUS,
            lambda s: focus, _focus_into),
    Pattern("space_to_depth", "TResNet SpaceToDepth, block 4: view, permute(0,3,5,1,2,4)",
            "Alibaba-MIIL/TResNet src/models/tresnet/layers/space_to_depth.py", torch.float32,
            S2D, lambda s: space_to_depth, _s2d_into),
    Pattern("attention_split_heads", "(B, T, H*D) -> (B, H, T, D): view, transpose(1, 2), "
            "contiguous", "huggingface/transformers (_shape)", torch.float16, TOKENS,
            lambda s: split_heads,
            _copy_view(lambda x: x.view(x.shape[0], x.shape[1], 32, -1).transpose(1, 2))),
    Pattern("attention_merge_heads", "(B, H, T, D) -> (B, T, H*D): transpose(1, 2), "
            "contiguous, view", "karpathy/nanoGPT model.py", torch.float16, HEADS,
            lambda s: merge_heads,
            lambda s: lambda outs, y: outs[0].view(s[0][0], s[0][2], s[0][1], s[0][3]).copy_(
                y.transpose(1, 2))),
    Pattern("rotate_half_halves", "LLaMA rotate_half's halves: cat((x2, x1), -1) of 128-byte "
            "half rows", "huggingface/transformers models/llama/modeling_llama.py",
            torch.float16, ROPE, lambda s: rotate_half_halves, _rope_into,
            note="rotate_half is cat((-x2, x1)); the sign flip is arithmetic, left out"),
    Pattern("repeat_kv", "LLaMA repeat_kv, n_rep = 4: expand, reshape",
            "huggingface/transformers models/llama/modeling_llama.py", torch.float16, KV,
            lambda s: repeat_kv, _repeat_kv_into),
    Pattern("kv_cache_cat", "KV cache append: cat([past_key, key_states], -2), one token",
            "huggingface/transformers cache_utils.py (DynamicCache)", torch.float16, KV_CAT,
            lambda s: kv_cache_cat, _kv_cat_into),
    Pattern("kv_cache_write", "KV cache write into the preallocated cache: "
            "cache_k[:bsz, start_pos:start_pos+seqlen] = xk",
            "meta-llama/llama llama/model.py", torch.float16, KV_WRITE,
            lambda s: lambda cache, xk: kv_cache_write(cache, xk, s[1][1] // 2),
            mutates=True, note="an in-place write into the cache"),
    Pattern("to_channels_last", "x.contiguous(memory_format=torch.channels_last)",
            "torch memory format", torch.float32, NCHW, lambda s: to_channels_last,
            lambda s: lambda outs, x: outs[0].copy_(x)),
    Pattern("from_channels_last", "channels-last x.contiguous()", "torch memory format",
            torch.float32, NCHW, lambda s: from_channels_last,
            lambda s: lambda outs, x: outs[0].copy_(x), channels_last_input=True),
    Pattern("im2col_unfold", "im2col F.unfold(x, 3, padding=1)", "torch.nn.Unfold",
            torch.float32, IM2COL, lambda s: im2col),
)


def _inputs_of(shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype,
               channels_last: bool = False) -> Callable[[torch.Generator], list[torch.Tensor]]:
    def make(gen: torch.Generator) -> list[torch.Tensor]:
        xs = [random_tensor(s, dtype, gen) for s in shapes]
        if channels_last:
            xs = [x.contiguous(memory_format=torch.channels_last) for x in xs]
        return xs

    return make


def model_cases(smoke: bool = False) -> list[Case]:
    rows = []
    for p in PATTERNS:
        for size in ("tiny",) if smoke else tuple(MODEL_SIZES):
            shapes = p.shapes.get(size)
            if shapes is None:
                continue
            rows.append(Case(
                name=f"{p.name}_{size}", suite="models", description=p.description,
                dtype=_dtype_name(p.dtype), fn=p.fn(shapes), into=p.into(shapes),
                make_inputs=_inputs_of(shapes, p.dtype, p.channels_last_input),
                shape_text=" + ".join(_dims(s) for s in shapes), mutates=p.mutates,
                group=p.name, size=size, source=p.source, note=p.note))
    return rows


# --------------------------------------------------------------------------- symbolic

SYMBOLIC = (
    ("sym_roll_partition", "Swin roll + window_partition",
     {"tiny": ((2, 14, 14, 3),), "64K": ((2, 14, 14, 48),), "1M": ((2, 56, 56, 48),),
      "64M": ((56, 56, 56, 96),)}, torch.float32, lambda s: shifted_window_partition, None),
    ("sym_im2col", "im2col F.unfold(x, 3, padding=1)",
     {"tiny": ((2, 3, 5, 7),), "64K": ((2, 8, 11, 11),), "1M": ((2, 8, 42, 42),),
      "64M": ((8, 64, 60, 60),)}, torch.float32, lambda s: im2col, None),
    ("sym_repeat_kv", "LLaMA repeat_kv, n_rep = 4",
     {"tiny": ((2, 2, 5, 8),), "64K": ((2, 8, 4, 128),), "1M": ((2, 8, 64, 128),),
      "64M": ((2, 8, 4096, 128),)}, torch.float16, lambda s: repeat_kv, _repeat_kv_into),
)


def symbolic_cases(smoke: bool = False) -> list[Case]:
    """Each pattern traced with its batch (dim 0 of its input) a symbol, against the same
    function traced with static sizes; both planned for the same size."""
    rows = []
    for name, description, sizes, dtype, fn, into in SYMBOLIC:
        for size in ("tiny",) if smoke else tuple(MODEL_SIZES):
            shapes = sizes[size]
            rows.append(Case(
                name=f"{name}_{size}", suite="symbolic", description=description,
                dtype=_dtype_name(dtype), fn=fn(shapes),
                into=None if into is None else into(shapes),
                make_inputs=_inputs_of(shapes, dtype),
                shape_text=" + ".join(_dims(s) for s in shapes), group=name, size=size,
                dynamic={0: [0]}))
    return rows


def cases(suite: str, seed: int = 0, smoke: bool = False, random_rows: int = RANDOM_ROWS
          ) -> list[Case]:
    """The rows of `suite` (one of `SUITES`)."""
    if suite == "ttc":
        return ttc_cases(smoke)
    if suite == "models":
        return model_cases(smoke)
    if suite == "random":
        return random_cases(seed, random_rows, smoke)
    if suite == "symbolic":
        return symbolic_cases(smoke)
    raise ValueError(f"suite must be one of {SUITES}; got {suite!r}")
