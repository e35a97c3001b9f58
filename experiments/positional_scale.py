"""Runs :mod:`tisa.convert.positional_scale` (its docstring says what it measures and how
to call it); its committed results are under ``benchmarks/results/glue``."""

import sys

from tisa.convert.positional_scale import main

if __name__ == "__main__":
    sys.exit(main())
