"""``python -m tisa.doc_tables``: write (or ``--check``) the generated tables."""

from tisa.doc_tables import main

raise SystemExit(main())
