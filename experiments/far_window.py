"""Whether a converted model reads long documents better with an attention window
beyond the original's length (the far-field ramp), decided on held-out draws of the
long-input tasks (:mod:`tisa.longeval.variants` runs it; its committed result is
``benchmarks/results/longeval/far-window``).

    python experiments/far_window.py runs/convert --output-dir runs/far-window
"""

import sys

from tisa.longeval.variants import main

if __name__ == "__main__":
    sys.exit(main(variants=("full", "window-255=far_offset=255", "window-511=far_offset=511"),
                  output_dir="runs/far-window", description=__doc__.split("\n\n")[0]))
