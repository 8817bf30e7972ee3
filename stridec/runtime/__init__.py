"""stridec.runtime."""
