"""A stridec layout op inside a torch model: trace a pixel-unshuffle-to-tokens function,
register it as a torch custom operator, train a tiny model for a few steps under
torch.compile (Inductor on CUDA, aot_eager on the CPU), and check the loss and every
gradient against the same model written in plain torch.

    python examples/torch_custom_op.py
"""

from __future__ import annotations

import copy

import torch
from torch import nn

import stridec


def to_tokens(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, H/2 * W/2, C*4): 2x2 pixel unshuffle, channels last, as tokens."""
    B, C, H, W = x.shape
    x = x.reshape(B, C, H // 2, 2, W // 2, 2).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // 2) * (W // 2), C * 4)


class TokenModel(nn.Module):
    """Patch tokens through a linear layer; `layout` is the token function (torch or the
    stridec operator)."""

    def __init__(self, layout, channels: int, width: int) -> None:
        super().__init__()
        self.layout = layout
        self.proj = nn.Linear(channels * 4, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.layout(x))


def main(steps: int = 3, verbose: bool = True) -> float:
    """Train both models side by side; return the largest difference seen (loss or grad)."""
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    backend = "inductor" if cuda else "aot_eager"
    torch.manual_seed(0)
    example = torch.randn(2, 3, 4, 6, device=device)
    graph = stridec.trace(to_tokens, example)
    op = stridec.compile(graph).as_torch_op("stridec_examples::to_tokens")

    reference = TokenModel(to_tokens, channels=3, width=5).to(device)
    model = copy.deepcopy(reference)
    model.layout = op
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    worst = 0.0
    for step in range(steps):
        x = torch.randn(2, 3, 4, 6, device=device)
        target = torch.randn(2, 6, 5, device=device)
        x_ref, x_op = x.clone().requires_grad_(), x.clone().requires_grad_()
        losses = []
        for net, opt_, inp in ((reference, opt_ref, x_ref), (compiled, opt, x_op)):
            opt_.zero_grad()
            loss = nn.functional.mse_loss(net(inp), target)
            loss.backward()
            opt_.step()
            losses.append(loss.detach())
        pairs = [(losses[0], losses[1]), (x_ref.grad, x_op.grad)]
        for p_ref, p in zip(reference.parameters(), model.parameters(), strict=True):
            pairs += [(p_ref.grad, p.grad), (p_ref.detach(), p.detach())]
        step_worst = max(float((a - b).abs().max()) for a, b in pairs)
        worst = max(worst, step_worst)
        if verbose:
            print(f"step {step}: loss {losses[1].item():.6f} (torch {losses[0].item():.6f}), "
                  f"largest difference in loss, gradients and weights: {step_worst:.2e}")
    assert worst < 1e-5, f"stridec model differs from the torch model by {worst}"
    if verbose:
        print(f"{op.qualname} matches plain torch under torch.compile(backend={backend!r}); "
              f"graph:\n{graph}\nbackward graph:\n{op.adjoint.graph}")
    return worst


if __name__ == "__main__":
    main()
