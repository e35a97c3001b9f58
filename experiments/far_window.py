"""Whether a converted model reads long documents better with an attention window
beyond the original's length (the far-field ramp at offset 511, so that inputs of up to
512 tokens are computed exactly as before and no query reaches further than the original
model ever did), decided on held-out draws of the long-input tasks (:mod:`tisa.longeval.variants` runs it; its committed result is
``benchmarks/results/longeval/far-window``).

    python experiments/far_window.py runs/convert --output-dir runs/far-window
"""

import sys

from tisa.longeval.variants import main

if __name__ == "__main__":
    sys.exit(main(variants=("full", "window-511=far_offset=511"),
                  output_dir="runs/far-window", description=__doc__.split("\n\n")[0]))
