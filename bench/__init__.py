"""stridec's benchmark suite: `python bench/run.py` on a GPU, `--smoke` on the CPU. The
targets it measures are in docs/design.md#performance-targets."""

import warnings

# Triton 3.9 announces a future default on every compile; the Philox kernel uses an
# explicit fma, so the default does not matter. Silenced here as pytest silences it.
warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION is unset", category=UserWarning)
