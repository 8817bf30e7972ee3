"""C kernel source for the native CPU backend (`backend="cpu"`): copies, casts,
Philox."""
