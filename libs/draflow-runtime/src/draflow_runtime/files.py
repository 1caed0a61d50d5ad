"""Atomic file writes: the driver's CDI specs and checkpoint, the shim's checkpoint.

Every write goes to a temp file in the same directory and is renamed over the target, so a reader (or a
restart after a crash of the process) sees the old or the new content, never a torn file. How much
survives a power loss is the caller's choice (``durability``):

- ``"full"`` (default): the file is fsynced before the rename and the directory after it: once the call
  returns, the new content survives a power loss.
- ``"file"``: the file is fsynced before the rename, the directory is not: what the kubelet's checkpoint
  manager does (``pkg/kubelet/util/store``); a power loss may bring back the previous file, never a torn
  one. Half the disk flushes of ``"full"``.
- ``"none"``: rename only, what the CDI library does for CDI spec files (they usually live on tmpfs, and
  a power loss is a reboot, after which every claim is prepared again). A power loss may leave the file
  empty: a reader must check it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Literal

Durability = Literal["full", "file", "none"]


def atomic_write(path: Path, data: bytes, mode: int = 0o644, durability: Durability = "full") -> None:
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, rename, fsync of the directory
    (fewer flushes with a weaker ``durability``, see the module docstring).

    Blocking (call it through ``asyncio.to_thread`` from async code). A crash of the process at any point
    leaves the old file or the new one, never a torn one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            if durability != "none":
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durability != "full":
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
