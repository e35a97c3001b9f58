"""The GLUE protocol for TISA added to a pretrained encoder: sweep, select, protocol,
converted, summary, all (the stages and their settings: :mod:`tisa.glue.protocol`).

    python experiments/glue_protocol.py sweep
    python experiments/glue_protocol.py all --parallel 10 --converted-model runs/convert/model

Its results are committed under ``benchmarks/results/glue``.
"""

import sys

from tisa.glue.protocol import main

if __name__ == "__main__":
    sys.exit(main())
