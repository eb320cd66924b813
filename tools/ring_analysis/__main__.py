"""python3 -m ring_analysis: what tools/ring-analyze runs."""

import sys

from .cli import main

sys.exit(main())
