"""stridec.torch: compiled layout graphs as torch custom operators, their adjoint
(backward) graphs, and tracing of torch layout code into graphs
(docs/design.md#torch-integration)."""

from stridec.torch import autograd as _autograd  # noqa: F401 -- installs the autograd call
from stridec.torch.adjoint import Adjoint, Contribution, adjoint
from stridec.torch.custom_op import TorchOp, register
from stridec.torch.random import philox, philox_uniform
from stridec.torch.trace import Proxy, trace

__all__ = ["Adjoint", "Contribution", "Proxy", "TorchOp", "adjoint", "philox", "philox_uniform",
           "register", "trace"]
