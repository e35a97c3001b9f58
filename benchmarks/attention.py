"""Attention benchmark: TISA backends against SDPA without positional bias.

    python benchmarks/attention.py                 # the full benchmark (B=8, H=12, D=64)
    python benchmarks/attention.py --lengths 128 512 --forward-only-lengths

Prints, for L in {128, 512, 2048} (forward and forward+backward) and 8192 (forward only),
each variant's time and peak memory as a ratio against
``scaled_dot_product_attention`` with no bias, measured in the same process. Install the
``bench`` extra (x-transformers) to include its relative-position and ALiBi biases.
"""

import sys

if __name__ == "__main__":
    from tisa.cli import main

    sys.exit(main(["bench", "attention", *sys.argv[1:]]))
