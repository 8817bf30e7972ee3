"""stridec.compiler.passes."""
