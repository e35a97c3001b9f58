"""``python -m tisa.cli``: the same as the ``tisa`` command (for torchrun / accelerate launch)."""

import sys

from tisa.cli import main

sys.exit(main())
