"""Makes ``upstream_map`` importable from the unit tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
