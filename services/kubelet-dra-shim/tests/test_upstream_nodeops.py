"""``TestPrepareUnprepareResourcesSkipNodeOperations/*/Feature gate disabled during unprepare`` of kubelet
v1.37.1 restated (``kubelet_map.py``): a claim prepared while DRAOptionalNodeOperations was on, its pod
ended after the shim came back with the gate off (a rollback); the unprepare follows what the checkpoint
recorded and still skips the driver. Real API server, real unix sockets, real files."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import claim, device_class, eventually, pod
from shimenv import DRIVER, Env, _gone, _running
from test_node_operations import _allocate

from draflow_runtime.kube import PODS

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("ops", [["*"], ["NodeUnprepareResources"]], ids=["all", "unprepare-only"])
async def test_a_rollback_of_the_gate_still_skips_the_recorded_unprepare(
    env: Env, make_namespace: Any, ops: list[str]
) -> None:
    ns = await make_namespace("shim-ops")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    uid = (await claim(env.kube, ns, "skip", cls))["metadata"]["uid"]
    p = await pod(env.kube, ns, "p", env.node, ["skip"])
    await _allocate(env, ns, "skip", p, [(DRIVER, "gpu-0", ops)])
    await eventually(lambda: _running(env.kube, ns, "p"))
    assert env.checkpoint().claims[uid].skip_node_operations == {DRIVER: ops}

    await env.stop_shim()
    await env.start_shim(feature_gates="DRAOptionalNodeOperations=false")
    await env.kube.delete(PODS, "p", namespace=ns)
    await eventually(lambda: _gone(env.kube, PODS, "p", ns))
    await eventually(lambda: uid not in env.checkpoint().claims)
    assert env.driver.unprepared == []
