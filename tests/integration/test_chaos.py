"""The short chaos run (``python -m draflow_testenv.chaos --short``): 4 simulated nodes, pods churning,
one fault of each kind; every invariant of docs/chaos.md must hold during the run and after settling.

It runs as a subprocess with an environment of its own (it kills and restarts the API server and NATS,
which the session's shared environment must not see)."""

from __future__ import annotations

import asyncio
import sys

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.timeout(1200)
async def test_short_chaos_run_finds_no_violation() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "draflow_testenv.chaos", "--short",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    lines = text.strip().splitlines()
    assert lines and lines[-1].startswith("chaos: 0 violations in "), text[-6000:]
    assert proc.returncode == 0, text[-6000:]
