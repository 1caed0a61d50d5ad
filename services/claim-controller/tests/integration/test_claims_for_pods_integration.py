"""Claims generated from templates for pods, against the real kube-apiserver."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cc_kit import Kit, eventually, plain_claim, pod, template

from claim_controller.context import Hooks
from claim_controller.naming import POD_CLAIM_NAME_ANNOTATION
from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION
from draflow_testenv.otlp import OtlpReceiver
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration


async def recorded_statuses(kit: Kit, pod_name: str, count: int) -> dict[str, str] | None:
    current = await kit.get(PODS, pod_name)
    statuses = {s["name"]: s.get("resourceClaimName") for s in
                (current or {}).get("status", {}).get("resourceClaimStatuses") or ()}
    return statuses if len(statuses) == count else None


async def test_pod_with_two_template_claims_gets_two_claims_recorded_in_its_status(kit: Kit) -> None:
    tmpl = await kit.create(RESOURCE_CLAIM_TEMPLATES, template(
        "gpu-template", labels={"team": "ml"}, annotations={"example.com/note": "from-template"}))
    await kit.start_controller()
    created = await kit.create(PODS, pod("trainer", {
        "gpu-a": {"resourceClaimTemplateName": "gpu-template"},
        "gpu-b": {"resourceClaimTemplateName": "gpu-template"},
    }))

    statuses = await eventually(lambda: recorded_statuses(kit, "trainer", 2), what="two status entries")

    claims = {c["metadata"]["name"]: c for c in await kit.claims()}
    assert set(claims) == set(statuses.values())
    for pod_claim, claim_name in statuses.items():
        claim = claims[claim_name]
        meta = claim["metadata"]
        assert claim_name.startswith(f"trainer-{pod_claim}-")
        assert len(claim_name) == len(f"trainer-{pod_claim}-") + 5
        assert meta["annotations"][POD_CLAIM_NAME_ANNOTATION] == pod_claim
        assert meta["annotations"]["example.com/note"] == "from-template"
        assert meta["labels"] == {"team": "ml"}
        assert meta["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": created["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True,
        }]
        assert claim["spec"] == tmpl["spec"]["spec"]


async def test_claim_create_starts_the_claims_trace(kit: Kit, otlp_receiver: OtlpReceiver) -> None:
    """A root span claim.create per claim; its traceparent is in the claim for the other services."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    from draflow_runtime.tracing import setup_tracing

    exporter = OTLPSpanExporter(endpoint=f"http://{otlp_receiver.endpoint}", insecure=True)
    provider = setup_tracing("claim-controller", exporter=exporter, set_global=False)
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.start_controller(tracer_provider=provider)
    await kit.create(PODS, pod("traced", {"gpu": {"resourceClaimTemplateName": "t"}}))
    statuses = await eventually(lambda: recorded_statuses(kit, "traced", 1), what="status entry")
    claim = await kit.get(RESOURCE_CLAIMS, statuses["gpu"])
    assert claim is not None
    traceparent = claim["metadata"]["annotations"][TRACEPARENT_ANNOTATION]
    version, trace_id, span_id, flags = traceparent.split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled

    await asyncio.to_thread(provider.force_flush)
    spans = await otlp_receiver.wait_for(
        lambda spans: [s for s in spans if s.trace_id == trace_id and s.name == "claim.create"])
    assert len(spans) == 1
    span = spans[0]
    assert (span.span_id, span.parent_span_id, span.service_name) == (span_id, "", "claim-controller")
    assert span.attributes["k8s.resourceclaim.name"] == statuses["gpu"]
    assert span.attributes["k8s.resourceclaim.uid"] == claim["metadata"]["uid"]
    await asyncio.to_thread(provider.shutdown)


async def test_restart_between_create_and_status_update_creates_no_duplicate(kit: Kit) -> None:
    """The first controller 'dies' right after creating each claim, before writing the pod status."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    created_once = asyncio.Event()

    async def die_after_create(_pod: dict, _claim: dict) -> None:
        created_once.set()
        await asyncio.Event().wait()  # hang here until the test kills this controller

    first = await kit.start_controller(hooks=Hooks(after_claim_create=die_after_create))
    await kit.create(PODS, pod("victim", {"gpu": {"resourceClaimTemplateName": "t"}}))
    await asyncio.wait_for(created_once.wait(), 30)
    await kit.stop_controller(first)  # killed between the claim create and the pod status update
    assert len(await kit.claims()) == 1
    assert await recorded_statuses(kit, "victim", 1) is None

    await kit.start_controller()
    statuses = await eventually(lambda: recorded_statuses(kit, "victim", 1), what="status entry")

    async def one_claim() -> bool:
        return [c["metadata"]["name"] for c in await kit.claims()] == [statuses["gpu"]]

    await consistently(one_claim, 1.0, "no second claim is created")  # a wrong second create fails here
    claims = await kit.claims()
    assert [c["metadata"]["name"] for c in claims] == [statuses["gpu"]]


async def test_failed_status_update_retried_before_the_informer_saw_the_claim_creates_no_duplicate(
    kit: Kit,
) -> None:
    """Same process: the reconcile fails after the create and is retried at once (mutation cache)."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    failures = []

    async def fail_once(_pod: dict, _claim: dict) -> None:
        if not failures:
            failures.append(1)
            raise RuntimeError("injected: pod status update lost")

    await kit.start_controller(hooks=Hooks(after_claim_create=fail_once))
    await kit.create(PODS, pod("retried", {
        "a": {"resourceClaimTemplateName": "t"}, "b": {"resourceClaimTemplateName": "t"},
    }))
    statuses = await eventually(lambda: recorded_statuses(kit, "retried", 2), what="status entries")

    async def no_duplicate() -> bool:
        names = sorted(c["metadata"]["name"] for c in await kit.claims())
        return failures == [1] and names == sorted(statuses.values())

    await consistently(no_duplicate, 1.0, "the retry creates no duplicate claim")
    assert failures == [1]
    assert sorted(c["metadata"]["name"] for c in await kit.claims()) == sorted(statuses.values())


async def test_missing_template_is_reported_and_the_claim_created_when_it_appears(kit: Kit) -> None:
    await kit.start_controller()
    await kit.create(PODS, pod("waiting", {"gpu": {"resourceClaimTemplateName": "later"}}))
    event = await kit.wait_event("waiting", "FailedResourceClaimCreation")
    assert event["type"] == "Warning"
    assert "ResourceClaimTemplate later not found" in event["message"]
    assert await kit.claims() == []

    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("later"))
    statuses = await eventually(lambda: recorded_statuses(kit, "waiting", 1), what="status entry")
    assert [c["metadata"]["name"] for c in await kit.claims()] == [statuses["gpu"]]


async def test_reference_to_a_missing_claim_is_reported(kit: Kit) -> None:
    await kit.start_controller()
    await kit.create(PODS, pod("needs-shared", {"shared": {"resourceClaimName": "not-there"}}))
    event = await kit.wait_event("needs-shared", "ResourceClaimNotFound")
    assert event["type"] == "Warning"
    assert "not-there" in event["message"]
    assert await kit.claims() == []


async def test_deleted_generated_claim_of_a_live_pod_is_recreated_with_an_event(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.start_controller()
    await kit.create(PODS, pod("owner", {"gpu": {"resourceClaimTemplateName": "t"}}))
    first = (await eventually(lambda: recorded_statuses(kit, "owner", 1), what="status entry"))["gpu"]

    await kit.kube.delete(RESOURCE_CLAIMS, first, kit.namespace)

    async def replaced() -> dict[str, str] | None:
        statuses = await recorded_statuses(kit, "owner", 1)
        return statuses if statuses and statuses["gpu"] != first else None

    second = (await eventually(replaced, what="a new claim recorded"))["gpu"]
    assert [c["metadata"]["name"] for c in await kit.claims()] == [second]
    event = await kit.wait_event("owner", "ResourceClaimRecreated")
    assert first in event["message"] and second in event["message"]


async def test_pod_deleted_mid_flight_leaves_no_claim_behind(kit: Kit) -> None:
    """The pod is deleted right after its claim was created: the orphan is deleted (no GC needed)."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    deleted = asyncio.Event()

    async def delete_pod(p: dict, _claim: dict) -> None:
        await kit.kube.delete(PODS, p["metadata"]["name"], kit.namespace, grace_period_seconds=0)
        deleted.set()

    await kit.start_controller(hooks=Hooks(after_claim_create=delete_pod))
    await kit.create(PODS, pod("short-lived", {"gpu": {"resourceClaimTemplateName": "t"}}))
    await asyncio.wait_for(deleted.wait(), 30)
    await eventually(lambda: _no_claims(kit), what="no claims left")
    await consistently(lambda: _no_claims(kit), 1.0, "no claim is created again for the deleted pod")
    assert await kit.claims() == []


async def test_shared_claim_is_not_touched_by_pod_sync(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIMS, plain_claim("shared"))
    await kit.start_controller()
    await kit.create(PODS, pod("user", {"s": {"resourceClaimName": "shared"}}))

    async def untouched() -> bool:
        claim = await kit.get(RESOURCE_CLAIMS, "shared")
        return claim is not None and "ownerReferences" not in claim["metadata"] and not any(
            e["reason"] == "ResourceClaimNotFound" for e in await kit.pod_events("user"))

    await consistently(untouched, 1.0, "pod sync leaves the shared claim alone")
    claim = await kit.get(RESOURCE_CLAIMS, "shared")
    assert claim is not None and "ownerReferences" not in claim["metadata"]
    assert not any(e["reason"] == "ResourceClaimNotFound" for e in await kit.pod_events("user"))


async def _no_claims(kit: Kit) -> bool:
    return not await kit.claims()


async def test_a_user_made_claim_gets_its_trace_root_when_the_controller_first_sees_it(
    kit: Kit, otlp_receiver: OtlpReceiver,
) -> None:
    """A claim made by a user (no template, no traceparent) gets a root span claim.seen and its
    traceparent in the annotation, so the allocator, shim and driver have a trace to continue."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    from draflow_runtime.tracing import setup_tracing

    exporter = OTLPSpanExporter(endpoint=f"http://{otlp_receiver.endpoint}", insecure=True)
    provider = setup_tracing("claim-controller", exporter=exporter, set_global=False)
    await kit.create(RESOURCE_CLAIMS, plain_claim("shared"))
    await kit.start_controller(tracer_provider=provider)

    async def annotated() -> str | None:
        claim = await kit.get(RESOURCE_CLAIMS, "shared")
        return ((claim or {}).get("metadata", {}).get("annotations") or {}).get(TRACEPARENT_ANNOTATION)

    traceparent = await eventually(annotated, what="traceparent annotation on the user's claim")
    _, trace_id, span_id, _ = traceparent.split("-")
    await asyncio.to_thread(provider.force_flush)
    spans = await otlp_receiver.wait_for(lambda spans: [s for s in spans if s.trace_id == trace_id])
    assert [(s.name, s.span_id, s.parent_span_id) for s in spans] == [("claim.seen", span_id, "")]
    assert spans[0].attributes["draflow.first_seen_by"] == "claim-controller"
    # Written once: later reconciles of the claim keep the same root.
    await consistently(lambda: _same(annotated, traceparent), 1.0, what="the root stays")


async def _same(probe: Any, value: str) -> bool:
    return await probe() == value
