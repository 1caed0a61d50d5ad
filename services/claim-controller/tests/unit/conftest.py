"""Makes ``upstream_map`` and ``stub_apiserver`` (the API server as a local HTTP server) importable from
the unit tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
