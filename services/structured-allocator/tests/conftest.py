"""Makes the shared builders (``sa_builders``) importable from the unit tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
