"""stridec's benchmark suite: `python bench/run.py` on a GPU, `--smoke` on the CPU. The
targets it measures are in docs/design.md#performance-targets."""
