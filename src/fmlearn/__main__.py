"""``python -m fmlearn``: the same as the ``fmlearn`` command."""

import sys

from .cli import main

sys.exit(main())
