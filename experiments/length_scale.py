"""Runs :mod:`tisa.longeval.length_scale` (its docstring says what it measures and how
to call it); its committed result is ``benchmarks/results/longeval/length-scale``."""

import sys

from tisa.longeval.length_scale import main

if __name__ == "__main__":
    sys.exit(main())
