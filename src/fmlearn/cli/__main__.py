"""``python -m fmlearn.cli``: the same as the ``fmlearn`` command."""

import sys

from . import main

sys.exit(main())
