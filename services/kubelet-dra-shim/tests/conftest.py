from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # fakedriver, helpers


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="shim-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
