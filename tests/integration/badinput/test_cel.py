"""Bad CEL in DeviceClasses and claims. What the API server refuses never reaches draflow (checked here so
the corpus says where each input stops); what it accepts but cannot evaluate (unknown attribute domains,
the runtime cost budget) is the object's broken input: the pod's PodScheduled=False condition and a
FailedScheduling Event name the class or claim and the expression, the allocator keeps scheduling, and its
/healthz answers while it evaluates."""

from __future__ import annotations

import pytest
from badinput_kit import DRIVER, Stack

from draflow_runtime.errors import Invalid
from draflow_runtime.kube import DEVICE_CLASSES, PODS, RESOURCE_CLAIM_TEMPLATES

pytestmark = pytest.mark.integration

L25 = "[" + ", ".join(str(i) for i in range(25)) + "]"
# accepted by the API server; over the runtime budget
THREE_DEEP = f"{L25}.all(a, {L25}.all(b, {L25}.all(c, a + b + c >= 0)))"
# RE2 semantics: linear time; a backtracking engine takes minutes
REDOS = '"aaaaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a+)+$") == ""'
COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"


def _class(name: str, expression: str) -> dict[str, object]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


@pytest.mark.parametrize(("expression", "words"), [
    pytest.param("device.driver ==", "Syntax error", id="syntax"),
    pytest.param('device.driver == 1', "no matching overload", id="type-error"),
    pytest.param('device.attributes["x"].y.startsWith(1)', "no matching overload", id="type-error-call"),
    pytest.param('"a".matches("(")', "invalid matches argument", id="bad-constant-regex"),
    pytest.param(" && ".join([f"{L25}.all(a, {L25}.all(b, {L25}.all(c, {L25}.all(d, a+b+c+d >= {i}))))"
                              for i in range(4)]), "cost", id="estimated-cost"),
    pytest.param("device.driver == '" + "x" * 11 * 1024 + "'", "Too long", id="too-long"),
])
async def test_api_server_refuses_cel_it_cannot_compile_or_afford(
        stack: Stack, expression: str, words: str) -> None:
    name = stack.name("badcel") + f".{DRIVER}"
    with pytest.raises(Invalid) as refused:
        await stack.kube.create(DEVICE_CLASSES, _class(name, expression))
    assert "spec.selectors[0].cel.expression" in str(refused.value), refused.value
    assert words.lower() in str(refused.value).lower(), refused.value
    # the same expression in a claim template's request is refused the same way
    with pytest.raises(Invalid) as in_template:
        await stack.kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": stack.name("badcel")},
            "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {
                "deviceClassName": stack.flow.device_class,
                "selectors": [{"cel": {"expression": expression}}]}}]}}}}, namespace=stack.ns)
    assert "selectors[0].cel.expression" in str(in_template.value), in_template.value


async def test_selectors_that_fail_at_runtime_name_their_class_or_claim(stack: Stack) -> None:
    # An attribute domain no driver publishes: compiles, fails on every device ("no such key").
    unknown_domain = 'device.attributes["nosuch.example.com"].model == "x"'
    bad_class = stack.name("unknown-domain") + f".{DRIVER}"
    await stack.kube.create(DEVICE_CLASSES, _class(bad_class, unknown_domain))
    try:
        await stack.template("t-bad-class", bad_class)
        await stack.pod("bad-class", {"gpu": {"resourceClaimTemplateName": "t-bad-class"}})
        # The same in the claim's own request selector.
        await stack.kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t-bad-claim"},
            "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {
                "deviceClassName": stack.flow.device_class,
                "selectors": [{"cel": {"expression": unknown_domain}}]}}]}}}}, namespace=stack.ns)
        await stack.pod("bad-claim", {"gpu": {"resourceClaimTemplateName": "t-bad-claim"}})

        message = await stack.wait_condition("bad-class", bad_class)
        assert unknown_domain in message and "nosuch.example.com" in message, message
        event = await stack.wait_event("bad-class", "FailedScheduling", bad_class)
        assert event["type"] == "Warning"
        message = await stack.wait_condition("bad-claim", unknown_domain)
        assert "bad-claim-gpu" in message, message  # the generated claim's name
        await stack.wait_event("bad-claim", "FailedScheduling", unknown_domain)
        await stack.still_serving()
    finally:
        await stack.kube.delete(DEVICE_CLASSES, bad_class)


async def test_pathological_selectors_are_bounded_and_the_allocator_stays_responsive(stack: Stack) -> None:
    deep = stack.name("deep") + f".{DRIVER}"
    redos = stack.name("redos") + f".{DRIVER}"
    await stack.kube.create(DEVICE_CLASSES, _class(deep, THREE_DEEP))
    await stack.kube.create(DEVICE_CLASSES, _class(redos, f'device.driver == "{DRIVER}" && {REDOS}'))
    try:
        await stack.template("t-deep", deep)
        await stack.template("t-redos", redos)
        await stack.pod("deep", {"gpu": {"resourceClaimTemplateName": "t-deep"}})
        await stack.pod("redos", {"gpu": {"resourceClaimTemplateName": "t-redos"}})
        message = await stack.wait_condition("deep", deep, COST_EXCEEDED)
        assert THREE_DEEP in message
        await stack.wait_event("deep", "FailedScheduling", deep)
        await stack.flow.wait_running("redos")  # linear-time regex: just a selector that matches
        await stack.still_serving()
        # Broken input is reported once, not on every retry (the control pod requeued the broken one).
        assert len(await stack.events_of("deep", "FailedScheduling")) == 1
    finally:
        await stack.kube.delete(PODS, "redos", namespace=stack.ns)
        await stack.kube.delete(DEVICE_CLASSES, deep)
        await stack.kube.delete(DEVICE_CLASSES, redos)


async def test_many_broken_pods_do_not_starve_the_queue(stack: Stack) -> None:
    """Twenty pods whose class runs out of budget on every device, created at once, then the control pod:
    the control pod is not stuck behind their evaluations."""
    deep = stack.name("deep-many") + f".{DRIVER}"
    await stack.kube.create(DEVICE_CLASSES, _class(deep, THREE_DEEP))
    try:
        await stack.template("t-deep-many", deep)
        for i in range(20):
            await stack.pod(f"deep-many-{i}", {"gpu": {"resourceClaimTemplateName": "t-deep-many"}})
        await stack.still_serving()

        async def all_reported() -> bool:
            for i in range(20):
                if not await stack.events_of(f"deep-many-{i}", "FailedScheduling"):
                    return False
            return True

        await stack.until(all_reported, "every broken pod reported")
    finally:
        await stack.kube.delete(DEVICE_CLASSES, deep)
