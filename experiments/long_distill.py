"""Whether a conversion distilled on long blocks as well (``--long-weight``), alone or
with the content term, reads long documents better than the default conversion, decided
on held-out draws of the long-input tasks (:mod:`tisa.longeval.variants` runs it, each
other conversion as a ``NAME=@FOLDER`` variant).

With ``--long-weight W`` every distillation step also draws one block of ``--long-length``
tokens (2,048 by default). The student reads it in one pass; its target is the original
read in overlapping 512-token windows, each token's states from the window in which it
lies nearest the middle (:func:`tisa.convert.distill.windowed_states`).

    tisa convert sentence-transformers/all-MiniLM-L6-v2 --output-dir runs/convert
    tisa convert sentence-transformers/all-MiniLM-L6-v2 --long-weight 1 \\
        --output-dir runs/convert-long
    tisa convert sentence-transformers/all-MiniLM-L6-v2 --content-offsets 16 \\
        --content-beyond zero --long-weight 1 --long-every 3 --output-dir runs/convert-comb
    tisa convert sentence-transformers/all-MiniLM-L6-v2 --content-offsets 16 \\
        --long-weight 1 --long-every 3 --output-dir runs/convert-clip-comb
    python experiments/long_distill.py runs/convert --output-dir runs/long-distill

The long-input term on every third step alone, against the default:

    tisa convert sentence-transformers/all-MiniLM-L6-v2 --long-weight 1 --long-every 3 \\
        --output-dir runs/convert-le3
    python experiments/long_distill.py runs/convert --variants le3=@runs/convert-le3/model \\
        default --output-dir runs/long-every
"""

import sys

from tisa.longeval.variants import main

if __name__ == "__main__":
    sys.exit(main(variants=("clip-comb=@runs/convert-clip-comb/model",
                            "comb=@runs/convert-comb/model", "long-1=@runs/convert-long/model",
                            "default"),
                  output_dir="runs/long-distill", description=__doc__.split("\n\n")[0]))
