"""Whether a converted model reads long documents better with log-n attention scaling,
decided on held-out draws of the long-input tasks (:mod:`tisa.longeval.variants` runs
it; its committed result is ``benchmarks/results/longeval/length-scale``).

    python experiments/length_scale.py runs/convert --output-dir runs/length-scale
"""

import sys

from tisa.longeval.variants import main

if __name__ == "__main__":
    sys.exit(main(variants=("unscaled", "scale-512=length_scale=512"),
                  output_dir="runs/length-scale", description=__doc__.split("\n\n")[0]))
