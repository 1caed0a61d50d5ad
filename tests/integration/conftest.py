"""Shared by the deploy/ tests: ``deploy_kit`` importable, and the ``built`` fixture (one kustomize run
per session)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from draflow_testenv.binaries import ensure_binary

sys.path.insert(0, str(Path(__file__).parent))

from deploy_kit import BASES, OVERLAYS, target_dir


@pytest.fixture(scope="session")
async def built() -> dict[str, list[dict[str, Any]]]:
    """``kustomize build`` of every base and overlay: target -> its objects."""
    kustomize = await ensure_binary("kustomize")
    out: dict[str, list[dict[str, Any]]] = {}
    for target in BASES + OVERLAYS:
        proc = await asyncio.create_subprocess_exec(
            str(kustomize), "build", str(target_dir(target)),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await proc.communicate()
        assert proc.returncode == 0, f"kustomize build {target} failed:\n{stderr.decode()}"
        out[target] = [doc for doc in yaml.safe_load_all(stdout) if doc]
    return out

