"""Runs :mod:`tisa.convert.word_order` (its docstring says what it measures and how
to call it); its committed results are under ``benchmarks/results/glue``."""

import sys

from tisa.convert.word_order import main

if __name__ == "__main__":
    sys.exit(main())
