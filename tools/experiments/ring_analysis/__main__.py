"""python3 -m ring_analysis, with tools/experiments/ on sys.path: the same as tools/experiments/ring-analyze
(which also picks an interpreter with numpy and matplotlib)."""

import sys

from .cli import main

sys.exit(main())
