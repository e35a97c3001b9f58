"""Runs :mod:`tisa.convert.selection` (its docstring says what it scores and how to call
it): conversion settings chosen on held-out STS-B and CoLA train data."""

import sys

from tisa.convert.selection import main

if __name__ == "__main__":
    sys.exit(main())
