"""``python -m bench``: the benchmark command, run from a source checkout."""

import sys

from .command import main

sys.exit(main())
