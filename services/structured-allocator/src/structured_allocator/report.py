"""What users and neighbours see: pod conditions, Kubernetes Events and NATS claim events.

* Unschedulable pod: ``PodScheduled=False`` (reason ``Unschedulable``, the explanation's message) with a
  strategic-merge patch of ``pods/status`` (conditions merge by type), plus a Warning Event
  ``FailedScheduling``; written only when the message changed, so retries do not flood the API.
* NATS (JetStream, trace context in the headers): ``draflow.events.claim.<ns>.<name>.allocated``
  ``{"claimUID", "pod", "node", "devices": [{"request", "driver", "pool", "device"}]}`` and
  ``...allocation_failed`` ``{"claimUID", "pod", "reason"}``. JSON for now.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from draflow_runtime.errors import ApiError, NotFound, TransportError
from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import PODS, KubeClient
from draflow_runtime.log import get_logger

__all__ = ["Reporter", "claim_subject"]

log = get_logger(__name__)

Publish = Callable[..., Awaitable[bool]]


def claim_subject(claim: Mapping[str, Any], what: str) -> str:
    meta = claim["metadata"]
    return f"draflow.events.claim.{meta['namespace']}.{meta['name']}.{what}"


class Reporter:
    def __init__(self, kube: KubeClient, recorder: EventRecorder, field_manager: str,
                 publish: Publish | None) -> None:
        self.kube = kube
        self.recorder = recorder
        self.field_manager = field_manager
        self.publish = publish
        self._reported: dict[str, str] = {}  # pod key -> last unschedulable message written

    def forget(self, pod_key: str) -> None:
        self._reported.pop(pod_key, None)

    async def unschedulable(self, pod: Mapping[str, Any], message: str,
                            claims: list[Mapping[str, Any]]) -> None:
        """Condition + Warning Event + allocation_failed events, once per distinct message."""
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if self._reported.get(key) == message:
            return
        self._reported[key] = message
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": now,
        }]}}
        try:
            await self.kube.patch(PODS, meta["name"], body, meta["namespace"], patch_type="strategic",
                                  subresource="status", field_manager=self.field_manager)
        except NotFound:
            return
        except (ApiError, TransportError) as err:
            self._reported.pop(key, None)
            log.warning("pod condition not written", pod=key, error=str(err))
        await self.recorder.event(dict(pod), "Warning", "FailedScheduling", message)
        for claim in claims:
            await self._publish(claim, "allocation_failed", {
                "claimUID": claim["metadata"].get("uid", ""), "pod": key, "reason": message,
            })

    async def allocated(self, claim: Mapping[str, Any], allocation: Mapping[str, Any] | None,
                        pod_key: str, node: str) -> None:
        results = ((allocation or {}).get("devices") or {}).get("results") or []
        await self._publish(claim, "allocated", {
            "claimUID": claim["metadata"].get("uid", ""), "pod": pod_key, "node": node,
            "devices": [{k: r.get(k) for k in ("request", "driver", "pool", "device")} for r in results],
        })

    async def _publish(self, claim: Mapping[str, Any], what: str, payload: dict[str, Any]) -> None:
        if self.publish is None:
            return
        try:
            await self.publish(claim_subject(claim, what), orjson.dumps(payload))
        except Exception as err:  # an event is a courtesy: never fail a placement for it
            log.warning("claim event not published", subject=claim_subject(claim, what), error=repr(err))
