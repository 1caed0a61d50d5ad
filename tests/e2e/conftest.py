"""End-to-end tests on a real cluster of this machine (``draflow_testenv.cluster.ClusterEnvironment``):
two real nodes, each a kubelet and a containerd of its own, run real containers. They need root and the
real-node binaries (``hack/binaries.sh ensure-node``), so they run only under ``make e2e``
(``DRAFLOW_E2E=1``), not in a plain ``pytest`` run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from draflow_testenv import deploy_e2e, node_cleanup
from draflow_testenv.cluster import ClusterEnvironment

NODES = ["draflow-node-1", "draflow-node-2"]

if os.environ.get("DRAFLOW_E2E") != "1":
    collect_ignore_glob = ["test_*.py"]


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def cluster() -> AsyncIterator[ClusterEnvironment]:
    """The session's cluster of two nodes; stopping it leaves nothing of either node behind."""
    env = ClusterEnvironment(os.environ.get("DRAFLOW_TESTENV_STATE_DIR") or None, node_names=NODES)
    async with env:
        yield env
    for layout in env.node_layouts:
        assert await asyncio.to_thread(node_cleanup.leftovers, layout) == [], layout.name


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def installed(cluster: ClusterEnvironment) -> AsyncIterator[list[dict[str, Any]]]:
    """draflow installed on the cluster by ``kubectl apply -k`` of its e2e overlay (``deploy_e2e``)."""
    yield await deploy_e2e.install(cluster)
