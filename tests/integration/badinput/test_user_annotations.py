"""Annotations a user may write that draflow reads: the claim's trace context (``draflow.dev/traceparent``,
``draflow.dev/tracestate``, :mod:`draflow_runtime.claimtrace`). A user's claim carrying garbage, a huge
value or a valid-looking trace of someone else's is still allocated and prepared and its pod runs: a
broken annotation is replaced by a root of draflow's own, a foreign trace is adopted (it is the user's
choice), and nothing of it may stop a service or another pod."""

from __future__ import annotations

from typing import Any

import pytest
from badinput_kit import Stack

from draflow_runtime.kube import PODS, RESOURCE_CLAIMS
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION, TRACESTATE_ANNOTATION, context_from_annotations

pytestmark = pytest.mark.integration

FOREIGN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

# The largest trace state W3C allows: 32 members, keys and values of 256 characters.
HUGE_STATE = ",".join(f"k{i:02d}" + "a" * 253 + "=" + "v" * 256 for i in range(32))


async def _run_user_claim(stack: Stack, prefix: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A user's claim with ``annotations`` and a pod using it, Running; returns the claim as it ends up."""
    claim, pod = stack.name(f"{prefix}-claim"), stack.name(prefix)
    await stack.kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": claim, "annotations": annotations},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {
            "deviceClassName": stack.flow.device_class}}]}}}, namespace=stack.ns)
    await stack.pod(pod, {"gpu": {"resourceClaimName": claim}})
    try:
        await stack.flow.wait_running(pod)
        obj: dict[str, Any] = await stack.kube.get(RESOURCE_CLAIMS, claim, namespace=stack.ns)
        assert obj["status"]["allocation"], obj["status"]
        return obj
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)


@pytest.mark.parametrize("value", [
    "garbage",
    "00-00000000000000000000000000000000-0000000000000000-01",  # all-zero IDs: invalid by W3C
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff: invalid by W3C
    "00-" + "0af7651916cd43dd8448eb211c80319c" * 2000 + "-b7ad6b7169203331-01",  # 64 KB
], ids=["garbage", "zero-ids", "version-ff", "huge"])
async def test_a_broken_traceparent_is_replaced_by_a_root_and_the_claim_allocated(
    stack: Stack, value: str,
) -> None:
    claim = await _run_user_claim(stack, "badtrace", {TRACEPARENT_ANNOTATION: value})
    annotations = claim["metadata"]["annotations"]
    assert context_from_annotations(annotations) is not None, annotations.get(TRACEPARENT_ANNOTATION)
    await stack.still_serving()


async def test_a_foreign_trace_with_the_largest_trace_state_is_adopted_and_prepared(stack: Stack) -> None:
    claim = await _run_user_claim(stack, "foreign", {
        TRACEPARENT_ANNOTATION: FOREIGN, TRACESTATE_ANNOTATION: HUGE_STATE})
    assert claim["metadata"]["annotations"][TRACEPARENT_ANNOTATION] == FOREIGN  # adopted, not replaced
    await stack.still_serving()


async def test_a_garbage_trace_state_of_a_foreign_trace_is_ignored(stack: Stack) -> None:
    await _run_user_claim(stack, "badstate", {
        TRACEPARENT_ANNOTATION: FOREIGN, TRACESTATE_ANNOTATION: "=,=;;" + "\u00e9" * 40_000})
    await stack.still_serving()
