"""What an ``up`` leaves in its state dir for a later ``down``: ``pids.json`` (the owner and every process
group it started) and how to stop them from another process, guarded against pid reuse."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from draflow_testenv.binaries import repo_root
from draflow_testenv.process import kill_groups, pid_alive

__all__ = ["PIDS_FILE", "default_state_dir", "stop_recorded"]

PIDS_FILE = "pids.json"


def stop_recorded(state_dir: Path, grace: float = 20.0) -> list[int]:
    """Stop what an ``up`` recorded in ``<state>/pids.json``: SIGTERM its owner (which shuts down
    cleanly), then kill any recorded process group still alive. Returns the pids that were alive."""
    try:
        doc = json.loads((state_dir / PIDS_FILE).read_text())
    except (OSError, ValueError):
        return []
    owner = int(doc.get("owner", 0))
    children = [int(p) for group in ("processes", "services") for p in doc.get(group, {}).values()]
    alive = [p for p in [owner, *children] if p and p != os.getpid() and pid_alive(p) and _ours(p, state_dir)]
    children = [p for p in children if p in alive]
    if owner in alive:
        os.kill(owner, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and pid_alive(owner):
            time.sleep(0.1)
    kill_groups([p for p in children if pid_alive(p)], grace=5.0)
    if owner in alive and pid_alive(owner):
        os.kill(owner, signal.SIGKILL)
    return alive


def _ours(pid: int, state_dir: Path) -> bool:
    """Guard against pid reuse: the command line names the state dir or draflow-testenv."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return str(state_dir) in cmdline or "draflow-testenv" in cmdline or "draflow" in cmdline


def default_state_dir() -> Path:
    return repo_root() / ".draflow"
