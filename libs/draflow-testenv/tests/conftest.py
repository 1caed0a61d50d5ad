"""Makes the chaos invariant tests' builders (``test_chaos_invariants``) and ``readme_kit`` (what
``test_readme_examples`` checks the README with) importable from the tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
