"""``python -m dmlstride``: run the command line (see :mod:`dmlstride.cli`)."""

from .cli import main

raise SystemExit(main())
