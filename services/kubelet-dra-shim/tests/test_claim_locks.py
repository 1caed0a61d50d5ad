"""A driver hanging on one claim holds up only that claim: other pods on the node are prepared and
unprepared meanwhile (per-claim locks, as kubelet v1.37.1 calls drivers outside its claim-info cache lock).

The driver is the test-only one, serving real gRPC on a real unix socket; it hangs in
NodePrepareResources for claim ``a-gpu`` until the test lets it go.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import allocate, claim, device_class, eventually, pod
from shimenv import DRIVER, Env, _gone, _running

from draflow_runtime.kube import PODS

pytestmark = pytest.mark.integration


async def _allocated_pod(env: Env, ns: str, name: str, cls: str, device: str) -> dict[str, Any]:
    await claim(env.kube, ns, f"{name}-gpu", cls)
    p = await pod(env.kube, ns, name, env.node, [f"{name}-gpu"])
    await allocate(env.kube, ns, f"{name}-gpu", p, env.node, DRIVER, [device])
    return p


async def test_a_driver_hanging_on_one_claim_does_not_hold_up_other_pods_on_the_node(
    env: Env, make_namespace: Any
) -> None:
    ns = await make_namespace("shim")
    release = env.driver.hold("a-gpu")
    try:
        # The RPC timeout is far beyond the test's waits: only the lock can make B wait for A.
        await env.start_shim(rpc_timeout=600.0)
        cls = await device_class(env.kube, DRIVER)
        await _allocated_pod(env, ns, "a", cls, "gpu-0")
        await eventually(lambda: "a-gpu" in env.driver.blocked)

        await _allocated_pod(env, ns, "b", cls, "gpu-1")
        running_b = await eventually(lambda: _running(env.kube, ns, "b"))
        assert "a-gpu" in env.driver.blocked, "A's prepare is still hanging while B was prepared"
        claim_b = running_b["metadata"]["annotations"]
        assert claim_b, "B carries its CDI devices"
        state = env.checkpoint()
        by_name = {info.claim_name: info for info in state.claims.values()}
        assert by_name["b-gpu"].drivers[DRIVER], "B's devices are checkpointed"
        assert by_name["a-gpu"].drivers[DRIVER] == [], "A is recorded (before the driver call), not prepared"

        # Unprepare of B does not wait for A either.
        await env.kube.delete(PODS, "b", namespace=ns)
        await eventually(lambda: _gone(env.kube, PODS, "b", ns))
        await eventually(lambda: "b-gpu" not in {i.claim_name for i in env.checkpoint().claims.values()})
        assert "a-gpu" in env.driver.blocked

        release.set()
        await eventually(lambda: _running(env.kube, ns, "a"))
        by_name = {info.claim_name: info for info in env.checkpoint().claims.values()}
        assert set(by_name) == {"a-gpu"}
        assert [d.device_name for d in by_name["a-gpu"].drivers[DRIVER]] == ["gpu-0"]
    finally:
        release.set()
