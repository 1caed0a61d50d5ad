"""Creating a claim from a ResourceClaimTemplate, for a pod or a PodGroup alike (upstream's ``handleClaim``
and ``handlePodGroupClaim`` create the same way).

:func:`create_from_template` reads the template from the cache (missing: a Warning
``FailedResourceClaimCreation`` on the owner and None: the template's arrival enqueues the owner again),
builds the body (:func:`~claim_controller.naming.claim_body`), and creates it under a new root span
``claim.create`` whose ``traceparent`` goes into the claim's annotations: the claim's whole life
(allocation, preparation...) is one trace starting here. A create the API server refuses (Invalid too:
a claim asking for admin access outside a namespace labelled for it becomes valid once the namespace is
labelled) is a Warning ``FailedResourceClaimCreation`` on the owner and an error the runner retries with
backoff, as upstream. Every attempt is counted in ``resourceclaim_creates_total`` by status, admin access
and owner (as upstream).
With ``--create-with-finalizer`` (default) the claim carries the delete-protection finalizer from its
first version: the allocator, which adds it before it allocates a claim that lacks it, then does not write
it (one API write less per claim; kube-scheduler skips the same write when it is there). The clean-up
(``claims.py``) lifts it from a claim that is deleted unallocated, as kube-controller-manager does.
The created claim goes into the mutation cache (so a retry finds it before the informer does) and is
announced on NATS (``created``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context as OtelContext

from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER, PodClaim
from draflow_runtime.errors import ApiError, TransportError
from draflow_runtime.kube import RESOURCE_CLAIMS
from draflow_runtime.log import get_logger
from draflow_runtime.tracing import inject_into_annotations

from . import metrics
from .claimmetrics import admin_access, owner_labels
from .context import Context
from .naming import claim_body

__all__ = ["create_from_template"]

log = get_logger(__name__)

Obj = dict[str, Any]


async def create_from_template(
    ctx: Context, owner: Obj, owner_ref: Mapping[str, Any], pc: PodClaim, *, what: str,
    span_attributes: Mapping[str, str], pod: str = "", node: str | None = None,
    extra_labels: Mapping[str, str] | None = None,
) -> Obj | None:
    """Create the claim of ``pc`` of ``owner`` (a pod or a PodGroup, whose owner reference is ``owner_ref``)
    from its template; None (after a Warning Event) when the template is missing.

    ``what`` names the entry in messages ("pod claim", "PodGroup claim"); ``span_attributes`` are added
    to the ``claim.create`` span; ``pod`` and ``node`` go into the ``created`` event; ``extra_labels`` are
    added to the template's (a pod's claim: its shard label with ``--shards``). Raises the API error of a
    refused create (after the Warning Event).
    """
    namespace = owner["metadata"]["namespace"]
    template = ctx.templates.get(f"{namespace}/{pc.template_name}")
    if template is None:
        await ctx.recorder.event(
            owner, "Warning", "FailedResourceClaimCreation",
            f"{what} {pc.name}: ResourceClaimTemplate {pc.template_name} not found",
            action="CreatingResourceClaims",
        )
        return None
    # The allocator's finalizer, set now: it then skips its own write before allocating.
    finalizers = (DELETE_PROTECTION_FINALIZER,) if ctx.settings.create_with_finalizer else ()
    body = claim_body(owner_ref, namespace, pc.name, template, finalizers=finalizers)
    body["metadata"]["labels"].update(extra_labels or {})
    with ctx.tracer.start_as_current_span("claim.create", context=OtelContext()) as span:
        span.set_attribute("k8s.namespace.name", namespace)
        for key, value in span_attributes.items():
            span.set_attribute(key, value)
        span.set_attribute("draflow.pod_claim", pc.name)
        span.set_attribute("draflow.template", pc.template_name or "")
        body["metadata"]["annotations"] = inject_into_annotations(body["metadata"]["annotations"])
        labels = (admin_access(body), *owner_labels(body))
        try:
            claim = await ctx.kube.create(RESOURCE_CLAIMS, body, namespace,
                                          field_manager=ctx.settings.field_manager)
        except TransportError:
            metrics.RESOURCECLAIM_CREATES.labels("failure", *labels).inc()
            raise
        except ApiError as exc:
            metrics.RESOURCECLAIM_CREATES.labels("failure", *labels).inc()
            metrics.ERRORS.labels(operation="create").inc()
            await ctx.recorder.event(
                owner, "Warning", "FailedResourceClaimCreation",
                f"{what} {pc.name}: creating the claim from ResourceClaimTemplate {pc.template_name} "
                f"failed: {exc.message}", action="CreatingResourceClaims")
            raise
        metrics.RESOURCECLAIM_CREATES.labels("success", *labels).inc()
        span.set_attribute("k8s.resourceclaim.name", claim["metadata"]["name"])
        span.set_attribute("k8s.resourceclaim.uid", claim["metadata"]["uid"])
        ctx.mutations.mutated(claim)
        metrics.CLAIMS_CREATED.inc()
        log.debug("claim created", claim=f"{namespace}/{claim['metadata']['name']}", pod_claim=pc.name,
                  owner_kind=owner_ref.get("kind"))
        await ctx.events.created(claim, pod, node)
    return claim

