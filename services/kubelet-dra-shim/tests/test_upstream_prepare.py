"""Cases of kubelet v1.37.1's ``TestPrepareResources`` / ``TestUnprepareResources`` (``pkg/kubelet/cm/dra``)
restated against the shim (``kubelet_map.py`` says which), on a real API server with the test-only driver
serving real gRPC on real unix sockets.

kubelet's ``prepareResources`` checks every claim — its driver registered included — *before* it adds the
claim or the pod to its claim-info cache and checkpoint: a pod whose driver was never installed on the node
can then be deleted without the kubelet trying to unprepare through a driver that is not there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import claim, device_class, eventually, pod
from shimenv import DRIVER, Env, _gone, _running

from draflow_runtime.kube import EVENTS, PODS, RESOURCE_CLAIMS
from kubelet_dra_shim import checkpoint

pytestmark = pytest.mark.integration

GHOST = "ghost.shimtest.example"  # never registered on the node


async def _allocate(env: Env, ns: str, name: str, p: dict[str, Any], drivers: list[str]) -> None:
    """One device of each of ``drivers`` for claim ``name``, reserved for pod ``p``."""
    results = [{"request": "gpu", "driver": d, "pool": env.node, "device": f"dev-{i}"}
               for i, d in enumerate(drivers)]
    status = {
        "allocation": {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [env.node]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}],
    }
    await env.kube.patch(RESOURCE_CLAIMS, name, {"status": status}, namespace=ns, subresource="status")


def _checkpointed(env: Env) -> set[str]:
    """UIDs of the claims in the node's checkpoint (none before its first write)."""
    state = checkpoint.read(env.checkpoint_path)
    return set(state.claims) if state is not None else set()


async def _event(env: Env, ns: str, pod_name: str, text: str) -> bool:
    events = (await env.kube.list(EVENTS, namespace=ns))["items"]
    return any(e["involvedObject"]["name"] == pod_name and e["reason"] == "FailedPrepareDynamicResources"
               and text in e["message"] for e in events)


@pytest.mark.parametrize("drivers", [[GHOST], [DRIVER, GHOST]], ids=["only-unknown", "known-and-unknown"])
async def test_a_claim_of_an_unregistered_driver_is_not_recorded_and_its_pod_can_be_deleted(
    env: Env, make_namespace: Any, drivers: list[str]
) -> None:
    """``TestPrepareResources/unknown driver``: the prepare fails naming the driver, no driver is called
    and neither the claim nor the pod is checkpointed; deleting the pod then needs no unprepare."""
    ns = await make_namespace("shim-unknown")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    uid = (await claim(env.kube, ns, "c", cls))["metadata"]["uid"]
    p = await pod(env.kube, ns, "p", env.node, ["c"])
    await _allocate(env, ns, "c", p, drivers)

    await eventually(lambda: _event(env, ns, "p", f"DRA driver {GHOST} is not registered"))
    assert uid not in _checkpointed(env)
    assert not env.driver.spec_path(uid).exists(), "no driver is called for a claim that cannot be prepared"

    await env.kube.delete(PODS, "p", namespace=ns)  # the simulated kubelet ends it once nothing is left
    await eventually(lambda: _gone(env.kube, PODS, "p", ns))
    assert uid not in _checkpointed(env)
    assert uid not in env.driver.unprepared


async def test_a_claim_of_a_registered_driver_still_runs_beside_a_failing_one(
    env: Env, make_namespace: Any
) -> None:
    """The shim's per-claim failures (a README difference): the pod's claim of the registered driver is
    prepared while the other claim waits for its driver; kubelet fails the whole pod at once."""
    ns = await make_namespace("shim-unknown")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    good = (await claim(env.kube, ns, "good", cls))["metadata"]["uid"]
    bad = (await claim(env.kube, ns, "bad", cls))["metadata"]["uid"]
    p = await pod(env.kube, ns, "p", env.node, ["good", "bad"])
    await _allocate(env, ns, "good", p, [DRIVER])
    await _allocate(env, ns, "bad", p, [GHOST])

    await eventually(lambda: _event(env, ns, "p", f"DRA driver {GHOST} is not registered"))
    await eventually(lambda: env.driver.spec_path(good).exists())
    assert env.checkpoint().claims[good].drivers[DRIVER]
    assert bad not in _checkpointed(env)
    assert (await env.kube.get(PODS, "p", namespace=ns))["status"].get("phase") != "Running"


async def test_a_claim_of_the_same_name_waits_until_the_old_one_is_unprepared(
    env: Env, make_namespace: Any
) -> None:
    """``TestPrepareResources/claim UIDs mismatch``: while a claim is still prepared on the node (its pod
    force-deleted, its unprepare failing), a new claim of the same name is refused naming the old UID; it
    is prepared once the old one is unprepared, and the checkpoint never holds two claims of one name (a
    kubelet reading it keys claims by namespace and name)."""
    ns = await make_namespace("shim-reuse")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    old = (await claim(env.kube, ns, "c", cls))["metadata"]["uid"]
    p = await pod(env.kube, ns, "p", env.node, ["c"])
    await _allocate(env, ns, "c", p, [DRIVER])
    await eventually(lambda: env.driver.spec_path(old).exists())

    env.driver.fail_unprepare["c"] = "device still busy"
    await env.kube.delete(PODS, "p", namespace=ns, grace_period_seconds=0)
    await env.kube.delete(RESOURCE_CLAIMS, "c", namespace=ns)
    new = (await claim(env.kube, ns, "c", cls))["metadata"]["uid"]
    q = await pod(env.kube, ns, "q", env.node, ["c"])
    await _allocate(env, ns, "c", q, [DRIVER])

    await eventually(lambda: _event(env, ns, "q", f"different UID {old} still exists"))
    assert _checkpointed(env) == {old}
    assert not env.driver.spec_path(new).exists()

    del env.driver.fail_unprepare["c"]
    await eventually(lambda: _checkpointed(env) == {new})
    await eventually(lambda: env.driver.spec_path(new).exists())
    assert not env.driver.spec_path(old).exists()


async def test_a_claim_no_container_names_is_prepared_too(env: Env, make_namespace: Any) -> None:
    """``TestPrepareResources/no container uses the claim``: every claim of the pod is prepared, whether a
    container names it or not; no container gets its devices."""
    ns = await make_namespace("shim-unused")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    uid = (await claim(env.kube, ns, "c", cls))["metadata"]["uid"]
    p = await env.kube.create(PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
        "spec": {"nodeName": env.node, "resourceClaims": [{"name": "c", "resourceClaimName": "c"}],
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }, namespace=ns)
    await _allocate(env, ns, "c", p, [DRIVER])
    running = await eventually(lambda: _running(env.kube, ns, "p"))
    assert env.driver.spec_path(uid).exists() and uid in _checkpointed(env)
    annotations = running["metadata"].get("annotations") or {}
    assert json.loads(annotations.get("draflow.dev/cdi-devices", "{}")) == {}
