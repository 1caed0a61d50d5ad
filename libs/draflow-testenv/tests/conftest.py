"""Makes the chaos invariant tests' builders (``test_chaos_invariants``) importable from the other tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
