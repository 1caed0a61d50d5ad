"""Driver-call cases of kubelet v1.37.1's ``TestPrepareResources`` / ``TestUnprepareResources`` /
``TestGRPCMethods`` (``pkg/kubelet/cm/dra``) restated against the shim (``kubelet_map.py`` says which): what
the node does when a driver answers without a claim, fails, hangs past the call timeout, speaks only
v1beta1, or is gone when a claim must be unprepared. Real API server; the test-only driver serves real
gRPC on real unix sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from fakedriver import FakeDriver
from helpers import claim, device_class, eventually, pod
from shimenv import DRIVER, Env, _gone, _running

from draflow_runtime.kube import EVENTS, PODS, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

OLD = "old.shimtest.example"  # a driver that speaks only v1beta1.DRAPlugin


async def _allocate(
    env: Env, ns: str, name: str, pods: list[dict[str, Any]], drivers: tuple[str, ...] = (DRIVER,)
) -> None:
    results = [{"request": "gpu", "driver": d, "pool": env.node, "device": f"dev-{i}"}
               for i, d in enumerate(drivers)]
    status = {
        "allocation": {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [env.node]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                        for p in pods],
    }
    await env.kube.patch(RESOURCE_CLAIMS, name, {"status": status}, namespace=ns, subresource="status")


def _event(env: Env, ns: str, pod_name: str, reason: str, text: str) -> Any:
    async def check() -> bool:
        events = (await env.kube.list(EVENTS, namespace=ns))["items"]
        return any(e["involvedObject"]["name"] == pod_name and e["reason"] == reason and text in e["message"]
                   for e in events)
    return check


PREPARE_FAILED = "FailedPrepareDynamicResources"
UNPREPARE_FAILED = "FailedUnprepareDynamicResources"


async def _claim_and_pod(
    env: Env, ns: str, drivers: tuple[str, ...] = (DRIVER,)
) -> tuple[str, dict[str, Any]]:
    cls = await device_class(env.kube, DRIVER)
    uid = (await claim(env.kube, ns, "c", cls))["metadata"]["uid"]
    p = await pod(env.kube, ns, "p", env.node, ["c"])
    await _allocate(env, ns, "c", [p], drivers)
    return uid, p


def _devices(env: Env, uid: str) -> dict[str, list[str]]:
    return {drv: [d.device_name for d in devs] for drv, devs in env.checkpoint().claims[uid].drivers.items()}


async def _not_running(env: Env, ns: str, name: str) -> None:
    assert (await env.kube.get(PODS, name, namespace=ns))["status"].get("phase") != "Running"


@pytest.mark.parametrize("fault", ["answer-nothing", "internal-error", "timeout"])
async def test_a_prepare_the_driver_does_not_answer_for_fails_the_claim_until_it_does(
    env: Env, make_namespace: Any, fault: str
) -> None:
    """``TestPrepareResources/driver returns empty result`` ("skipped 1 ResourceClaims"),
    ``TestGRPCMethods/internal-error``, ``TestPrepareResources/should timeout``,
    ``TestGRPCWithTimeoutEnforced``: the claim is not prepared, the pod gets an Event naming the driver and
    the fault, and the retry prepares it once the driver answers."""
    ns = await make_namespace("shim-calls")
    release = asyncio.Event()
    if fault == "answer-nothing":
        env.driver.answer_nothing.add("c")
        text = "driver returned no result for the claim"
    elif fault == "internal-error":
        env.driver.abort = "driver broke"
        text = "NodePrepareResources failed: INTERNAL: driver broke"
    else:
        release = env.driver.hold("c")
        text = "NodePrepareResources failed: DEADLINE_EXCEEDED"
    await env.start_shim(rpc_timeout=0.5)
    uid, _ = await _claim_and_pod(env, ns)

    await eventually(_event(env, ns, "p", PREPARE_FAILED, text))
    await _not_running(env, ns, "p")
    assert not env.checkpoint().claims[uid].prepared
    assert env.driver.prepared.count(uid) >= 1

    env.driver.answer_nothing.clear()
    env.driver.abort = ""
    env.driver.held.clear()
    release.set()
    await eventually(lambda: _running(env.kube, ns, "p"))
    assert [d.device_name for d in env.checkpoint().claims[uid].drivers[DRIVER]] == ["dev-0"]


@pytest.mark.parametrize("fault", ["answer-nothing", "internal-error", "timeout", "driver-gone"])
async def test_an_unprepare_the_driver_does_not_answer_for_keeps_the_claim_until_it_does(
    env: Env, make_namespace: Any, fault: str
) -> None:
    """``TestUnprepareResources/should fail when driver returns empty response``, ``.../should timeout``,
    ``.../unknown driver`` (the driver gone when the pod ends): the claim stays in the checkpoint, the pod
    gets a FailedUnprepareDynamicResources Event and is not deleted; once the driver answers (or is back)
    the claim is unprepared and the pod goes. Driver gone: the pod is deleted once the shim has seen the
    driver unregister (before that, an unprepare finds its socket gone: UNAVAILABLE, not "not registered")."""
    ns = await make_namespace("shim-calls")
    fleet = await env.start_shim(rpc_timeout=0.5)
    uid, _ = await _claim_and_pod(env, ns)
    await eventually(lambda: _running(env.kube, ns, "p"))

    release = asyncio.Event()
    if fault == "answer-nothing":
        env.driver.answer_nothing.add("c")
        text = "driver returned no result for the claim"
    elif fault == "internal-error":
        env.driver.abort = "driver broke"
        text = "NodeUnprepareResources failed: INTERNAL: driver broke"
    elif fault == "timeout":
        env.driver.held_unprepare["c"] = release
        text = "NodeUnprepareResources failed: DEADLINE_EXCEEDED"
    else:
        await env.driver.stop()
        text = f"DRA driver {DRIVER} is not registered"
        store = fleet.nodes[env.node].store
        await eventually(lambda: store.get(DRIVER) is None)  # the shim saw the driver unregister
    await env.kube.delete(PODS, "p", namespace=ns)

    await eventually(_event(env, ns, "p", UNPREPARE_FAILED, text))
    assert uid in env.checkpoint().claims
    assert not await _gone(env.kube, PODS, "p", ns)

    env.driver.answer_nothing.clear()
    env.driver.abort = ""
    env.driver.held_unprepare.clear()
    release.set()
    if fault == "driver-gone":
        await env.driver.start()
    await eventually(lambda: _gone(env.kube, PODS, "p", ns))
    assert uid not in env.checkpoint().claims
    assert not env.driver.spec_path(uid).exists()


@pytest_asyncio.fixture(loop_scope="session")
async def old(env: Env) -> AsyncIterator[FakeDriver]:
    d = env.root / env.node
    driver = FakeDriver(OLD, d / "plugins_registry", d / "plugins", d / "cdi", env.kube,
                        versions=("v1beta1.DRAPlugin",))
    await driver.start()
    try:
        yield driver
    finally:
        await driver.stop()


async def test_a_claim_is_prepared_and_unprepared_through_a_v1beta1_driver(
    env: Env, old: FakeDriver, make_namespace: Any
) -> None:
    """``TestGRPCMethods/v1beta1`` (and ``/v1`` beside it): one claim with a device of a v1 driver and one of
    a v1beta1-only driver; each is called on the version it registered, both record their devices."""
    ns = await make_namespace("shim-calls")
    await env.start_shim()
    uid, _ = await _claim_and_pod(env, ns, (DRIVER, OLD))
    await eventually(lambda: _running(env.kube, ns, "p"))
    devices = _devices(env, uid)
    assert devices == {DRIVER: ["dev-0"], OLD: ["dev-1"]}
    assert old.spec_path(uid).exists() and env.driver.spec_path(uid).exists()

    await env.kube.delete(PODS, "p", namespace=ns)
    await eventually(lambda: _gone(env.kube, PODS, "p", ns))
    assert uid in old.unprepared and not old.spec_path(uid).exists()


async def test_a_retried_prepare_records_each_device_once(
    env: Env, old: FakeDriver, make_namespace: Any
) -> None:
    """``TestPrepareResources/should not duplicate devices on prepare retry``: a claim of two drivers whose
    prepare failed in one; the retry calls both again and the checkpoint has each device once."""
    ns = await make_namespace("shim-calls")
    old.fail_prepare["c"] = "not yet"
    await env.start_shim()
    uid, _ = await _claim_and_pod(env, ns, (DRIVER, OLD))
    await eventually(_event(env, ns, "p", PREPARE_FAILED, "not yet"))
    await eventually(lambda: env.driver.prepared.count(uid) >= 2)

    del old.fail_prepare["c"]
    await eventually(lambda: _running(env.kube, ns, "p"))
    devices = _devices(env, uid)
    assert devices == {DRIVER: ["dev-0"], OLD: ["dev-1"]}


async def test_only_the_new_claim_of_a_pod_is_sent_to_the_driver(env: Env, make_namespace: Any) -> None:
    """``TestPrepareResourcesWithPreparedAndNewClaim``, ``TestPrepareResources/resource already prepared``:
    a pod with a claim already prepared on the node (for another pod) and a new one; only the new one is
    sent to the driver."""
    ns = await make_namespace("shim-calls")
    await env.start_shim()
    shared, p = await _claim_and_pod(env, ns)
    await eventually(lambda: _running(env.kube, ns, "p"))
    cls = await device_class(env.kube, DRIVER)
    new = (await claim(env.kube, ns, "n", cls))["metadata"]["uid"]
    q = await pod(env.kube, ns, "q", env.node, ["c", "n"])
    await _allocate(env, ns, "c", [p, q])
    await _allocate(env, ns, "n", [q])
    await eventually(lambda: _running(env.kube, ns, "q"))
    assert env.driver.prepared.count(shared) == 1 and env.driver.prepared.count(new) == 1
    assert env.checkpoint().claims[shared].pod_uids == {p["metadata"]["uid"], q["metadata"]["uid"]}


async def test_a_pod_that_never_got_the_claim_leaves_it_prepared_when_it_goes(
    env: Env, make_namespace: Any
) -> None:
    """``TestUnprepareResources/should skip unprepare for pod that never prepared the claim``: pod q names the
    claim p holds but is not reserved for it; deleting q unprepares nothing and p keeps its claim."""
    ns = await make_namespace("shim-calls")
    await env.start_shim()
    uid, p = await _claim_and_pod(env, ns)
    await eventually(lambda: _running(env.kube, ns, "p"))
    await pod(env.kube, ns, "q", env.node, ["c"])  # waits for a reservation that never comes
    # A graceful delete: the simulated kubelet removes q only after the shim ran q's unprepare.
    await env.kube.delete(PODS, "q", namespace=ns)
    await eventually(lambda: _gone(env.kube, PODS, "q", ns))
    assert env.checkpoint().claims[uid].pod_uids == {p["metadata"]["uid"]}
    assert uid not in env.driver.unprepared
    assert env.driver.spec_path(uid).exists()
    await _running(env.kube, ns, "p")
