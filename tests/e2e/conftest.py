"""End-to-end tests on a real cluster of this machine (``draflow_testenv.cluster.ClusterEnvironment``):
a real kubelet and containerd run real containers. They need root and the real-node binaries
(``hack/binaries.sh ensure-node``), so they run only under ``make e2e`` (``DRAFLOW_E2E=1``), not in a plain
``pytest`` run.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest_asyncio

from draflow_testenv.cluster import ClusterEnvironment

if os.environ.get("DRAFLOW_E2E") != "1":
    collect_ignore_glob = ["test_*.py"]


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def cluster() -> AsyncIterator[ClusterEnvironment]:
    env = ClusterEnvironment(os.environ.get("DRAFLOW_TESTENV_STATE_DIR") or None)
    async with env:
        yield env
