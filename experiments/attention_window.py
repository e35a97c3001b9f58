"""Whether a converted model reads long documents better when each token attends only to
the keys within a window of the original's length, decided on held-out draws of the
long-input tasks (:mod:`tisa.longeval.variants` runs it).

A hard window of +-W (``attention_window=W``: -inf beyond) leaves inputs of up to W + 1
tokens as they were. With W = 255 no query sees more than the 511 keys around it, fewer
than the original model's 512 positions, each with the bias it had in the conversion.
Attention then costs O(L * W) rather than O(L^2). Its committed result is
``benchmarks/results/longeval/attention-window``.

    python experiments/attention_window.py runs/convert --output-dir runs/attention-window
"""

import sys

from tisa.longeval.variants import main

if __name__ == "__main__":
    sys.exit(main(variants=("full", "window-255=attention_window=255"),
                  output_dir="runs/attention-window", description=__doc__.split("\n\n")[0]))
