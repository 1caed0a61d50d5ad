"""ManagedProcess.kill is a crash: SIGKILL only, the process never sees a SIGTERM first.

Before: kill() was stop(grace=0): SIGTERM, then SIGKILL a moment later. A service's graceful shut-down began
in between: the chaos run's "SIGKILL" of a claim-controller shard holder logged "lease released" and the
other replica took its shards at once instead of after the Lease expired (the crash path went untested).
The window is a race, so the test kills a real process with a SIGTERM handler many times: the old kill let
the handler run in 1 to 4 of 30 kills on the shared machine (4 runs out of 4 failed)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from draflow_testenv.process import ManagedProcess
from draflow_testenv.wait import eventually

CHILD = """
import pathlib, signal, sys
marker = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: marker.write_text("SIGTERM"))
pathlib.Path(sys.argv[1] + ".ready").write_text("1")
while True:
    sum(range(1000))  # busy in Python: a SIGTERM handler runs at once
"""

KILLS = 60


async def test_kill_sends_only_sigkill_no_sigterm_handler_ever_runs(tmp_path: Path) -> None:
    handled = []
    for i in range(KILLS):
        marker = tmp_path / f"marker-{i}"
        proc = ManagedProcess(f"child-{i}", [sys.executable, "-c", CHILD, str(marker)], tmp_path / f"{i}.log")
        await proc.start()
        try:
            await eventually(lambda m=marker: Path(f"{m}.ready").exists(), 30, "child ready", interval=0.01)
            assert await proc.kill() == -signal.SIGKILL
            await asyncio.sleep(0.01)
            if marker.exists():
                handled.append(i)
        finally:
            await proc.stop(grace=0)
    assert handled == [], f"a SIGTERM handler ran before the kill in {len(handled)} of {KILLS} kills"
