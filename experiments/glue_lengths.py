"""Runs :mod:`tisa.glue.lengths` (its docstring says what it counts and how to call it);
its committed result is ``benchmarks/results/glue/lengths``."""

import sys

from tisa.glue.lengths import main

if __name__ == "__main__":
    sys.exit(main())
