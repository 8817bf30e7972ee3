"""The IR: layouts, formats, dtypes, ops, graphs, text form and the reference executor."""
