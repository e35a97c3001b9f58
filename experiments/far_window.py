"""Whether a converted model reads long documents better with an attention window
beyond the original's length, decided on held-out draws of the long-input tasks
(:mod:`tisa.longeval.variants` runs it; its committed result is
``benchmarks/results/longeval/far-window``).

The window is the far-field ramp at offset 511 (slope 1: a key k tokens past it gets
e^-k of its weight), so inputs of up to 512 tokens are computed exactly as before and
a query hardly reaches further than the original model's 512 positions ever did.

    python experiments/far_window.py runs/convert --output-dir runs/far-window
"""

import sys

from tisa.longeval.variants import main

if __name__ == "__main__":
    sys.exit(main(variants=("full", "window-511=far_offset=511"),
                  output_dir="runs/far-window", description=__doc__.split("\n\n")[0]))
