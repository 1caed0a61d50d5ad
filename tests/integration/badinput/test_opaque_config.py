"""Malformed opaque driver config. The API server refuses parameters that are not a JSON object or are over
its size limit; what it accepts but the driver cannot use fails only that claim's prepare, with a
FailedPrepareDynamicResources Event naming the claim and the field; config for another driver is not ours
to read and changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from badinput_kit import DRIVER, Stack

from draflow_runtime.dra import claim_names
from draflow_runtime.errors import Invalid
from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES

pytestmark = pytest.mark.integration

MIB = 1024 * 1024


def _opaque(parameters: Any, driver: str = DRIVER) -> dict[str, Any]:
    return {"requests": ["r0"], "opaque": {"driver": driver, "parameters": parameters}}


@pytest.mark.parametrize(("parameters", "words"), [
    pytest.param([1, 2, 3], "object", id="a-list"),
    pytest.param("GpuConfig", "object", id="a-string"),
    pytest.param(42, "object", id="a-number"),
    pytest.param({"kind": "GpuConfig", "blob": "x" * MIB}, "too long", id="one-mib"),
])
async def test_api_server_refuses_parameters_that_are_not_an_object_or_too_big(
        stack: Stack, parameters: Any, words: str) -> None:
    with pytest.raises(Invalid) as refused:
        await stack.template(stack.name("t-opaque"), config=[_opaque(parameters)])
    assert "opaque.parameters" in str(refused.value), refused.value
    assert words in str(refused.value).lower(), refused.value


@pytest.mark.parametrize(("parameters", "words"), [
    pytest.param({}, "apiVersion", id="empty-object"),
    pytest.param({"kind": "NotAGpuConfig", "apiVersion": f"{DRIVER}/v1"}, "kind: Input should be 'GpuConfig'",
                 id="wrong-kind"),
    pytest.param({"kind": "GpuConfig", "apiVersion": f"{DRIVER}/v1",
                  "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": 7}}}, "interval",
                 id="wrong-type"),
    # just under the API server's limit: accepted, and big for a gRPC message header or a log line
    pytest.param({"kind": "GpuConfig", "apiVersion": f"{DRIVER}/v1", "junk": "x" * 9000}, "junk",
                 id="ten-kib-of-unknown-field"),
])
async def test_config_the_driver_cannot_use_fails_that_claim_with_a_named_error(
        stack: Stack, parameters: Any, words: str) -> None:
    template, pod = stack.name("t-opaque"), stack.name("opaque")
    await stack.template(template, config=[_opaque(parameters)])
    await stack.pod(pod, {"gpu": {"resourceClaimTemplateName": template}})
    try:
        claim = claim_names(await stack.kube.get(PODS, pod, namespace=stack.ns)) or [""]
        event = await stack.wait_event(pod, "FailedPrepareDynamicResources", words)
        assert event["type"] == "Warning"
        current = await stack.kube.get(PODS, pod, namespace=stack.ns)
        (claim_name,) = claim_names(current) or claim
        assert f"{stack.ns}/{claim_name}" in event["message"], event["message"]
        assert len(event["message"]) < 4096, len(event["message"])  # the 9 KiB value is not echoed whole
        assert current["status"].get("phase") == "Pending"
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)
        await stack.kube.delete(RESOURCE_CLAIM_TEMPLATES, template, namespace=stack.ns)


async def test_config_for_another_driver_is_left_to_that_driver(stack: Stack) -> None:
    template, pod = stack.name("t-other"), stack.name("other-driver")
    await stack.template(template, config=[
        _opaque({"anything": ["goes", {"here": None}], "kind": 1}, driver="other.example.com")])
    await stack.pod(pod, {"gpu": {"resourceClaimTemplateName": template}})
    try:
        running = await stack.flow.wait_running(pod)
        claim = await stack.flow.claim_of(running)
        assert json.dumps(claim["status"]["allocation"]["devices"]["config"][0]["opaque"]["driver"]) == \
            '"other.example.com"'
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)
        await stack.kube.delete(RESOURCE_CLAIM_TEMPLATES, template, namespace=stack.ns)
