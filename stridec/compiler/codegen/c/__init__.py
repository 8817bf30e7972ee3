"""C kernel source for the cpu backend: casts, Philox."""
