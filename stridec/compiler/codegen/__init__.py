"""stridec.compiler.codegen."""
