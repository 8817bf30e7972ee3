"""stridec.compiler."""
