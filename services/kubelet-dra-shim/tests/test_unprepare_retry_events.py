"""A driver that goes away while the shim's call to it is in flight: what the pod shows while its claim is
retried.

The driver's registration socket vanishes first, so the shim deregisters the driver and closes its
channel under the call it holds (gRPC cancels the calls of a channel it closes; kubelet's Go client fails
them with ``Canceled``). The call fails its claims like any failed call, the pod gets a Warning Event, and
every retry until the driver is back fails with "not registered", which the pod shows too.

Before: the cancelled call escaped as a cancellation of the reconcile; the pod's own retry was lost (with
the runner's worker), only the node's sweep retried the unprepare, and the sweep logged its failures and
wrote no Event, so the pod showed nothing newer than the cut-off call. Real API server; the test-only
driver serves real gRPC on real unix sockets.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers import allocate, claim, device_class, eventually, pod
from shimenv import DRIVER, Env, _gone, _running

from draflow_runtime.kube import EVENTS, PODS

pytestmark = pytest.mark.integration

PREPARE_FAILED = "FailedPrepareDynamicResources"
UNPREPARE_FAILED = "FailedUnprepareDynamicResources"


def _warned(env: Env, ns: str, pod_name: str, reason: str, text: str) -> Any:
    """A check: the pod has a Warning Event of ``reason`` whose message contains ``text``."""

    async def warned() -> bool:
        events = (await env.kube.list(EVENTS, namespace=ns))["items"]
        messages = [e["message"] for e in events if e["involvedObject"]["name"] == pod_name
                    and e["type"] == "Warning" and e["reason"] == reason]
        assert any(text in m for m in messages), messages
        return True

    return warned


async def _deregister_mid_call(env: Env, node_store: Any) -> None:
    """The driver's sockets vanish, the registration socket first: the shim deregisters the driver (and
    closes its channel) while the driver still holds the call; then the driver stops."""
    env.driver.reg_socket.unlink()
    await eventually(lambda: node_store.get(DRIVER) is None)
    await env.driver.stop()


async def test_a_pod_whose_driver_went_away_mid_unprepare_gets_a_not_registered_event_for_the_retries(
    env: Env, make_namespace: Any
) -> None:
    ns = await make_namespace("shim-gone-mid-call")
    fleet = await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    uid = (await claim(env.kube, ns, "c", cls))["metadata"]["uid"]
    p = await pod(env.kube, ns, "p", env.node, ["c"])
    await allocate(env.kube, ns, "c", p, env.node, DRIVER, ["gpu-0"])
    await eventually(lambda: _running(env.kube, ns, "p"))

    release = env.driver.held_unprepare["c"] = asyncio.Event()
    try:
        await env.kube.delete(PODS, "p", namespace=ns)
        await eventually(lambda: uid in env.driver.unprepared)  # in flight, held by the driver
        await _deregister_mid_call(env, fleet.nodes[env.node].store)
    finally:
        del env.driver.held_unprepare["c"]
        release.set()

    not_registered = f"DRA driver {DRIVER} is not registered on node {env.node}"
    await eventually(_warned(env, ns, "p", UNPREPARE_FAILED, not_registered))  # before: never
    assert uid in env.checkpoint().claims
    assert not await _gone(env.kube, PODS, "p", ns)

    await env.driver.start()  # back: the claim is unprepared and the pod goes
    await eventually(lambda: _gone(env.kube, PODS, "p", ns))
    assert uid not in env.checkpoint().claims


async def test_a_prepare_cut_off_by_its_driver_going_away_fails_the_claim_and_is_retried(
    env: Env, make_namespace: Any
) -> None:
    ns = await make_namespace("shim-gone-mid-call")
    fleet = await env.start_shim()
    release = env.driver.hold("c")
    try:
        cls = await device_class(env.kube, DRIVER)
        uid = (await claim(env.kube, ns, "c", cls))["metadata"]["uid"]
        p = await pod(env.kube, ns, "p", env.node, ["c"])
        await allocate(env.kube, ns, "c", p, env.node, DRIVER, ["gpu-0"])
        await eventually(lambda: "c" in env.driver.blocked)  # in flight, held by the driver
        await _deregister_mid_call(env, fleet.nodes[env.node].store)
    finally:
        env.driver.held.clear()
        release.set()

    cut_off = "NodePrepareResources failed: CANCELLED: the connection to DRA driver"
    await eventually(_warned(env, ns, "p", PREPARE_FAILED, cut_off))  # before: no Event, no retry
    await eventually(_warned(env, ns, "p", PREPARE_FAILED, f"DRA driver {DRIVER} is not registered"))
    assert env.checkpoint().claims[uid].drivers == {DRIVER: []}  # recorded, no devices yet

    await env.driver.start()  # back: the claim is prepared and the pod runs
    await eventually(lambda: _running(env.kube, ns, "p"))
    assert [d.device_name for d in env.checkpoint().claims[uid].drivers[DRIVER]] == ["gpu-0"]
