"""The shim against a real kube-apiserver, real unix sockets and real files (test-only driver in-process)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from helpers import allocate, claim, device_class, eventually, pod, validate_cdi
from prometheus_client import REGISTRY
from shimenv import DRIVER, Env, _gone, _running

from draflow_runtime.kube import EVENTS, NODES, PODS, RESOURCE_CLAIMS
from draflow_testenv.wait import consistently
from kubelet_dra_shim.simkubelet import CDI_ANNOTATION

pytestmark = pytest.mark.integration


async def _prepared_pod(
    env: Env, ns: str, name: str = "p", devices: tuple[str, ...] = ("gpu-0",), **claim_kw: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    cls = await device_class(env.kube, DRIVER)
    c = await claim(env.kube, ns, f"{name}-gpu", cls, driver=DRIVER, **claim_kw)
    p = await pod(env.kube, ns, name, env.node, [f"{name}-gpu"])
    await allocate(env.kube, ns, f"{name}-gpu", p, env.node, DRIVER, list(devices))
    running = await eventually(lambda: _running(env.kube, ns, name))
    return c, running


async def test_prepared_pod_runs_and_deleting_it_unprepares(env: Env, make_namespace: Any) -> None:
    ns = await make_namespace("shim")
    await env.start_shim()
    node = await env.kube.get(NODES, env.node)
    assert node["status"]["allocatable"]["pods"] == "110"
    c, running = await _prepared_pod(env, ns, devices=("gpu-0", "gpu-1"))

    devices = json.loads(running["metadata"]["annotations"][CDI_ANNOTATION])
    assert devices == {
        "main": [f"{DRIVER}/gpu={c['metadata']['uid']}-gpu-0", f"{DRIVER}/gpu={c['metadata']['uid']}-gpu-1"]
    }
    validate_cdi(env.cdi_root, devices["main"])
    assert running["status"]["containerStatuses"][0]["state"]["running"]
    entry = env.checkpoint().claims[c["metadata"]["uid"]]
    assert entry.pod_uids == {running["metadata"]["uid"]}
    assert [d.device_name for d in entry.drivers[DRIVER]] == ["gpu-0", "gpu-1"]

    await env.kube.delete(PODS, "p", namespace=ns)  # graceful: the simulated kubelet finishes it
    await eventually(lambda: _gone(env.kube, PODS, "p", ns))
    assert not env.driver.spec_path(c["metadata"]["uid"]).exists()
    assert env.checkpoint().claims == {}


async def test_restart_reprepares_each_claim_once(env: Env, make_namespace: Any) -> None:
    ns = await make_namespace("shim")
    await env.start_shim()
    c, running = await _prepared_pod(env, ns)
    assert env.driver.prepare_calls == 1
    await env.stop_shim()
    env.driver.spec_path(c["metadata"]["uid"]).unlink()  # as if the CDI spec was lost on tmpfs
    await env.start_shim()
    await eventually(lambda: env.driver.spec_path(c["metadata"]["uid"]).exists())
    await consistently(lambda: env.driver.prepare_calls == 2, 1.0, "pod updates and resyncs prepare no more")
    assert env.driver.prepare_calls == 2
    state = env.checkpoint()
    assert list(state.claims) == [c["metadata"]["uid"]]
    assert state.claims[c["metadata"]["uid"]].pod_uids == {running["metadata"]["uid"]}
    assert (await _running(env.kube, ns, "p"))["metadata"]["annotations"][CDI_ANNOTATION] == running[
        "metadata"
    ]["annotations"][CDI_ANNOTATION]


async def test_reboot_is_repaired_even_when_restarts_are_trusted(env: Env, make_namespace: Any) -> None:
    ns = await make_namespace("shim")
    await env.start_shim(reprepare_after_restart=False)
    c, _ = await _prepared_pod(env, ns)
    await env.stop_shim()
    await env.start_shim(reprepare_after_restart=False)  # same boot: the checkpoint is trusted
    await consistently(lambda: env.driver.prepare_calls == 1, 1.0, "the trusted claim is not prepared again")
    assert env.driver.prepare_calls == 1
    await env.stop_shim()
    env.driver.spec_path(c["metadata"]["uid"]).unlink()
    (env.root / "boot_id").write_text("boot-2\n")  # the node rebooted: tmpfs CDI specs are gone
    await env.start_shim(reprepare_after_restart=False)
    await eventually(lambda: env.driver.spec_path(c["metadata"]["uid"]).exists())
    assert env.driver.prepare_calls == 2
    # The new boot is recorded once every claim is prepared again (not before: a crash would then trust them).
    await eventually(lambda: env.checkpoint().boot_id == "boot-2")


async def test_driver_restart_registers_again_and_keeps_serving(env: Env, make_namespace: Any) -> None:
    ns = await make_namespace("shim")
    await env.start_shim()
    await _prepared_pod(env, ns, "first")
    await env.driver.stop()
    await asyncio.sleep(0.3)  # the driver stays down for 3 registry polls (0.1 s): an outage, not a swap
    await env.driver.start()
    await eventually(lambda: len(env.driver.registrations) == 2)
    assert env.driver.registrations == [(True, ""), (True, "")]
    await _prepared_pod(env, ns, "second")


async def test_force_deleted_pod_with_deleted_claim_is_unprepared_from_the_checkpoint(
    env: Env, make_namespace: Any
) -> None:
    ns = await make_namespace("shim")
    await env.start_shim()
    c, _ = await _prepared_pod(env, ns, "a")
    c2, _ = await _prepared_pod(env, ns, "b")
    # While the shim runs: claim first, then the pod with grace period 0.
    await env.kube.delete(RESOURCE_CLAIMS, "a-gpu", namespace=ns)
    await env.kube.delete(PODS, "a", namespace=ns, grace_period_seconds=0)
    await eventually(lambda: not env.driver.spec_path(c["metadata"]["uid"]).exists())
    # While the shim is down.
    await env.stop_shim()
    await env.kube.delete(RESOURCE_CLAIMS, "b-gpu", namespace=ns)
    await env.kube.delete(PODS, "b", namespace=ns, grace_period_seconds=0)
    await env.start_shim()
    await eventually(lambda: not env.driver.spec_path(c2["metadata"]["uid"]).exists())
    await eventually(lambda: env.checkpoint().claims == {})


async def test_shared_claim_is_unprepared_only_when_its_last_pod_ends(env: Env, make_namespace: Any) -> None:
    ns = await make_namespace("shim")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    c = await claim(env.kube, ns, "shared", cls)
    p1 = await pod(env.kube, ns, "p1", env.node, ["shared"])
    p2 = await pod(env.kube, ns, "p2", env.node, ["shared"])
    await allocate(env.kube, ns, "shared", p1, env.node, DRIVER, ["gpu-0"])
    await env.kube.patch(
        RESOURCE_CLAIMS,
        "shared",
        {
            "status": {
                "reservedFor": [
                    {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                    for p in (p1, p2)
                ]
            }
        },
        namespace=ns,
        subresource="status",
    )
    await eventually(lambda: _running(env.kube, ns, "p1"))
    await eventually(lambda: _running(env.kube, ns, "p2"))
    spec = env.driver.spec_path(c["metadata"]["uid"])
    await env.kube.delete(PODS, "p1", namespace=ns, grace_period_seconds=0)
    await eventually(lambda: _gone(env.kube, PODS, "p1", ns))

    def p2_only() -> bool:
        return env.checkpoint().claims[c["metadata"]["uid"]].pod_uids == {p2["metadata"]["uid"]}

    await eventually(p2_only)
    await consistently(lambda: spec.exists() and p2_only(), 1.0, "the claim stays prepared for p2")
    assert spec.exists()
    assert env.checkpoint().claims[c["metadata"]["uid"]].pod_uids == {p2["metadata"]["uid"]}
    await env.kube.delete(PODS, "p2", namespace=ns, grace_period_seconds=0)
    await eventually(lambda: not spec.exists())


def _claim_operations(result: str) -> float:
    labels = {"operation": "prepare", "driver": DRIVER, "result": result}
    return REGISTRY.get_sample_value("draflow_shim_claim_operations_total", labels) or 0.0


async def test_invalid_opaque_config_fails_only_that_claim(env: Env, make_namespace: Any) -> None:
    ns = await make_namespace("shim")
    failed_before, ok_before = _claim_operations("error"), _claim_operations("ok")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    good = await claim(env.kube, ns, "good", cls)
    bad = await claim(
        env.kube,
        ns,
        "bad",
        cls,
        driver=DRIVER,
        config={"kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing", "timeSlising": {}}},
    )
    p = await pod(env.kube, ns, "p", env.node, ["good", "bad"])
    await allocate(env.kube, ns, "good", p, env.node, DRIVER, ["gpu-0"])
    await allocate(env.kube, ns, "bad", p, env.node, DRIVER, ["gpu-1"])

    async def warning() -> list[dict[str, Any]]:
        events = await env.kube.list(EVENTS, namespace=ns)
        return [
            e
            for e in events["items"]
            if e["reason"] == "FailedPrepareDynamicResources" and e["involvedObject"]["name"] == "p"
        ]

    events = await eventually(warning)
    assert events[0]["type"] == "Warning"
    assert f"{ns}/bad" in events[0]["message"]
    assert "sharing.timeSlising" in events[0]["message"]
    assert env.driver.spec_path(good["metadata"]["uid"]).exists()
    assert not env.driver.spec_path(bad["metadata"]["uid"]).exists()
    state = env.checkpoint()
    assert state.claims[good["metadata"]["uid"]].drivers[DRIVER][0].device_name == "gpu-0"
    assert state.claims[bad["metadata"]["uid"]].drivers[DRIVER] == []
    assert (await env.kube.get(PODS, "p", namespace=ns))["status"].get("phase") == "Pending"
    # each attempt counts the bad claim as a failed prepare, the good one as prepared once
    assert _claim_operations("error") > failed_before
    assert _claim_operations("ok") > ok_before


async def test_run_duration_finishes_the_pod_and_unprepares(env: Env, make_namespace: Any) -> None:
    ns = await make_namespace("shim")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    c = await claim(env.kube, ns, "job-gpu", cls)
    p = await pod(env.kube, ns, "job", env.node, ["job-gpu"], annotations={"draflow.dev/run-duration": "1s"})
    await allocate(env.kube, ns, "job-gpu", p, env.node, DRIVER, ["gpu-0"])

    async def succeeded() -> bool:
        got = await env.kube.get(PODS, "job", namespace=ns)
        return got["status"].get("phase") == "Succeeded"

    await eventually(succeeded)
    await eventually(lambda: not env.driver.spec_path(c["metadata"]["uid"]).exists())
