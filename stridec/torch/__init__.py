"""stridec.torch."""
