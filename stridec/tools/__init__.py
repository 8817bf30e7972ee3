"""stridec.tools."""
