"""Whether a converted model reads long documents better in windows of W tokens (each
embedded alone, the embeddings averaged: ``tisa longeval``'s ``chunk-W``) than whole,
decided on held-out draws of the long-input tasks (:mod:`tisa.longeval.variants` runs it).

A window of W > 512 tokens is something only the converted model can read; its cost is
linear in the document's length (L / W forwards of W tokens), where the whole document's
attention is quadratic.

    python experiments/chunk_windows.py runs/convert --output-dir runs/chunk-windows
"""

import sys

from tisa.longeval.variants import main

if __name__ == "__main__":
    sys.exit(main(variants=("full",), strategies=("chunk-1024", "chunk-2048"),
                  output_dir="runs/chunk-windows",
                  description=__doc__.split("\n\n")[0]))
