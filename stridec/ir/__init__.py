"""stridec.ir."""
