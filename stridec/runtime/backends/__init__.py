"""stridec.runtime.backends."""
