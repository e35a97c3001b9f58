"""Runs :mod:`tisa.convert.logit_terms` (its docstring says what it measures and how to
call it): which part of a position table's effect on attention a function of j - i can
carry, and which part of it a conversion misses."""

import sys

from tisa.convert.logit_terms import main

if __name__ == "__main__":
    sys.exit(main())
