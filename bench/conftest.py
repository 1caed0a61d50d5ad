"""Makes ``sidebyside`` importable for the tests under bench/ (the scripts add their own directory)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
