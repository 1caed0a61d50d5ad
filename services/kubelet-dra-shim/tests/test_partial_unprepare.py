"""A claim of two drivers whose unprepare fails in one of them, as kubelet v1.37.1 ``pkg/kubelet/cm/dra``
handles it (``unprepareResources``): the claim info stays whole — every driver with its devices, the last
pod's reference — in the cache and the checkpoint until every driver unprepared it; the retry calls every
driver again (unprepare is idempotent); a new pod cannot attach to the claim meanwhile, and once the claim
is unprepared it is prepared again through both drivers.

Both drivers are the test-only one, serving real gRPC on real unix sockets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from fakedriver import FakeDriver
from helpers import claim, device_class, eventually, pod
from shimenv import DRIVER, Env, _gone, _running

from draflow_runtime.kube import EVENTS, PODS, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

NET = "net.shimtest.example"


@pytest_asyncio.fixture(loop_scope="session")
async def net(env: Env) -> AsyncIterator[FakeDriver]:
    """A second driver on the env's node."""
    d = env.root / env.node
    driver = FakeDriver(NET, d / "plugins_registry", d / "plugins", d / "cdi", env.kube)
    await driver.start()
    try:
        yield driver
    finally:
        await driver.stop()


async def _allocate(env: Env, ns: str, name: str, pods: list[dict[str, Any]]) -> None:
    """``gpu-0`` of the env's driver and ``nic-0`` of NET, reserved for ``pods``."""
    status = {
        "allocation": {
            "devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": env.node, "device": "gpu-0"},
                {"request": "gpu", "driver": NET, "pool": env.node, "device": "nic-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [env.node]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                        for p in pods],
    }
    await env.kube.patch(RESOURCE_CLAIMS, name, {"status": status}, namespace=ns, subresource="status")


def _devices(env: Env, uid: str) -> dict[str, list[str]]:
    entry = env.checkpoint().claims[uid]
    return {driver: [d.device_name for d in devices] for driver, devices in entry.drivers.items()}


async def _running_pod_of_both_drivers(env: Env, ns: str) -> tuple[str, dict[str, Any]]:
    """The shim started, claim ``multi`` (one device of each driver) of pod ``p``, ``p`` Running; returns
    the claim's UID and the pod."""
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    uid = (await claim(env.kube, ns, "multi", cls))["metadata"]["uid"]
    p = await pod(env.kube, ns, "p", env.node, ["multi"])
    await _allocate(env, ns, "multi", [p])
    await eventually(lambda: _running(env.kube, ns, "p"))
    return uid, p


async def test_a_failed_driver_keeps_the_whole_claim_until_every_driver_unprepared_it(
    env: Env, net: FakeDriver, make_namespace: Any
) -> None:
    ns = await make_namespace("shim-partial")
    uid, p = await _running_pod_of_both_drivers(env, ns)
    assert _devices(env, uid) == {DRIVER: ["gpu-0"], NET: ["nic-0"]}

    net.fail_unprepare["multi"] = "nic-0 is busy"
    await env.kube.delete(PODS, "p", namespace=ns)  # the simulated kubelet ends it once unprepared
    await eventually(lambda: net.unprepared.count(uid) >= 2)
    # The driver that succeeded is still recorded with its devices, and so is the pod that held the claim.
    entry = env.checkpoint().claims[uid]
    assert _devices(env, uid) == {DRIVER: ["gpu-0"], NET: ["nic-0"]}
    assert entry.pod_uids == {p["metadata"]["uid"]}
    assert env.driver.unprepared.count(uid) >= 2, "the retry calls every driver of the claim again"

    del net.fail_unprepare["multi"]
    await eventually(lambda: _gone(env.kube, PODS, "p", ns))
    assert uid not in env.checkpoint().claims


async def test_a_claim_being_unprepared_is_prepared_again_through_every_driver(
    env: Env, net: FakeDriver, make_namespace: Any
) -> None:
    ns = await make_namespace("shim-partial")
    uid, _ = await _running_pod_of_both_drivers(env, ns)

    net.fail_unprepare["multi"] = "nic-0 is busy"
    await env.kube.delete(PODS, "p", namespace=ns)  # the simulated kubelet ends it once unprepared
    await eventually(lambda: net.unprepared.count(uid) >= 1)
    q = await pod(env.kube, ns, "q", env.node, ["multi"])
    await _allocate(env, ns, "multi", [q])

    async def refused() -> bool:
        events = (await env.kube.list(EVENTS, namespace=ns))["items"]
        return any(e["involvedObject"]["name"] == "q" and "being unprepared" in e["message"]
                   for e in events)

    await eventually(refused)
    assert (await env.kube.get(PODS, "q", namespace=ns))["status"].get("phase") != "Running"

    del net.fail_unprepare["multi"]
    await eventually(lambda: _running(env.kube, ns, "q"))
    entry = env.checkpoint().claims[uid]
    assert entry.pod_uids == {q["metadata"]["uid"]}
    assert _devices(env, uid) == {DRIVER: ["gpu-0"], NET: ["nic-0"]}
    assert env.driver.spec_path(uid).exists() and net.spec_path(uid).exists()
