"""stridec's benchmark suite (SPEC §9): `python bench/run.py` on a GPU, `--smoke` on the CPU."""
