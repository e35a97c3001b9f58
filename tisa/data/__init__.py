"""Data: corpora, tokenizers and GLUE tasks with their metrics (one module per source)."""
