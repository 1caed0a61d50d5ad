"""DRAOptionalNodeOperations against a real kube-apiserver, real unix sockets and real files: the shim
skips the driver calls an allocation result says to skip (kubelet v1.37.1 ``pkg/kubelet/cm/dra``), still
records and checkpoints the claim, and its simulated node declares the feature."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import claim, device_class, eventually, pod
from shimenv import DRIVER, Env, _gone, _running

from draflow_runtime.kube import EVENTS, NODES, PODS, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

UNREGISTERED = "net.shimtest.example"  # a driver no socket on the node serves


async def _allocate(env: Env, ns: str, name: str, the_pod: dict[str, Any],
                    results: list[tuple[str, str, list[str] | None]]) -> None:
    """``status.allocation`` with (driver, device, skipNodeOperations) results and the pod reserved."""
    out = []
    for driver, device, ops in results:
        r: dict[str, Any] = {"request": "gpu", "driver": driver, "pool": env.node, "device": device}
        if ops is not None:
            r["skipNodeOperations"] = ops
        out.append(r)
    status = {
        "allocation": {
            "devices": {"results": out},
            "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [env.node]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": the_pod["metadata"]["name"],
                         "uid": the_pod["metadata"]["uid"]}],
    }
    written = await env.kube.patch(RESOURCE_CLAIMS, name, {"status": status}, namespace=ns,
                                   subresource="status")
    # The API server keeps the field only with the gate on (testenv's WANTED_GATES).
    assert [r.get("skipNodeOperations") for r in written["status"]["allocation"]["devices"]["results"]] \
        == [ops for _, _, ops in results]


async def test_skipped_driver_is_never_called_and_the_claim_is_still_checkpointed(
    env: Env, make_namespace: Any
) -> None:
    ns = await make_namespace("shim-ops")
    await env.start_shim()
    node = await env.kube.get(NODES, env.node)
    assert "DRAOptionalNodeOperations" in node["status"]["declaredFeatures"]

    cls = await device_class(env.kube, DRIVER)
    c = await claim(env.kube, ns, "mixed", cls)
    p = await pod(env.kube, ns, "p", env.node, ["mixed"])
    await _allocate(env, ns, "mixed", p, [(DRIVER, "gpu-0", None), (UNREGISTERED, "nic-0", ["*"])])
    running = await eventually(lambda: _running(env.kube, ns, "p"))

    uid = c["metadata"]["uid"]
    entry = env.checkpoint().claims[uid]
    assert entry.pod_uids == {running["metadata"]["uid"]}
    assert [d.device_name for d in entry.drivers[DRIVER]] == ["gpu-0"]
    assert entry.drivers[UNREGISTERED] == []  # recorded, never prepared
    assert entry.skip_node_operations == {UNREGISTERED: ["*"]}
    assert env.driver.prepare_calls == 1

    await env.kube.delete(PODS, "p", namespace=ns)
    await eventually(lambda: _gone(env.kube, PODS, "p", ns))
    await eventually(lambda: env.checkpoint().claims == {})
    assert env.driver.unprepared == [uid]  # the registered driver only; the skipped one was not needed


async def test_a_claim_skipping_only_unprepare_is_prepared_but_never_unprepared(
    env: Env, make_namespace: Any
) -> None:
    ns = await make_namespace("shim-ops")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    c = await claim(env.kube, ns, "keep", cls)
    p = await pod(env.kube, ns, "p", env.node, ["keep"])
    await _allocate(env, ns, "keep", p, [(DRIVER, "gpu-0", ["NodeUnprepareResources"])])
    await eventually(lambda: _running(env.kube, ns, "p"))
    assert env.driver.prepare_calls == 1
    assert env.driver.spec_path(c["metadata"]["uid"]).exists()

    await env.kube.delete(PODS, "p", namespace=ns)
    await eventually(lambda: _gone(env.kube, PODS, "p", ns))
    await eventually(lambda: env.checkpoint().claims == {})
    assert env.driver.unprepared == []


async def test_with_the_gate_off_a_skipping_claim_fails_with_an_event_and_the_node_does_not_declare_it(
    env: Env, make_namespace: Any
) -> None:
    ns = await make_namespace("shim-ops")
    await env.start_shim(feature_gates="DRAOptionalNodeOperations=false")
    node = await env.kube.get(NODES, env.node)
    assert "DRAOptionalNodeOperations" not in node["status"].get("declaredFeatures", [])
    cls = await device_class(env.kube, DRIVER)
    await claim(env.kube, ns, "skip", cls)
    p = await pod(env.kube, ns, "p", env.node, ["skip"])
    await _allocate(env, ns, "skip", p, [(DRIVER, "gpu-0", ["*"])])

    async def warning() -> list[dict[str, Any]]:
        events = await env.kube.list(EVENTS, namespace=ns)
        return [e for e in events["items"]
                if e["reason"] == "FailedPrepareDynamicResources" and e["involvedObject"]["name"] == "p"]

    events = await eventually(warning)
    assert f"{ns}/skip" in events[0]["message"] and "DRAOptionalNodeOperations" in events[0]["message"]
    assert env.driver.prepare_calls == 0
    assert (await env.kube.get(PODS, "p", namespace=ns))["status"].get("phase") == "Pending"
