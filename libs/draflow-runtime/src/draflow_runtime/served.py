"""Is an optional API served? Asked once before a service watches it.

kube-apiserver serves a beta or alpha API only when its ``--runtime-config`` turns it on (PodGroups,
``scheduling.k8s.io/v1beta1``; ResourcePoolStatusRequests, ``resource.k8s.io/v1alpha3``), and any API can be
turned off there (``resource.k8s.io/v1/devicetaintrules=false``). An informer of a resource that is not
served lists 404 forever and never syncs, and a service that waits for its informers would place nothing.
So a service asks :func:`api_served` before it watches an optional API; on ``False`` it runs as with the
feature gate off, after one warning naming the resource, its API version and the gate.

How :func:`decide` answers, from the discovery document of the resource's group version
(``/apis/<group>/<version>``, which every authenticated user may read: no RBAC of its own):

=========================================  ==========  ==============================================
discovery answer                           verdict     why
=========================================  ==========  ==============================================
200 listing the resource's plural          SERVED
200 without it                             NOT_SERVED  the group version is served, not this resource
404                                        NOT_SERVED  the group version is not served
401, 403 (or any other 4xx)                SERVED      not a statement about the API: the informer
                                                       retries and logs, as for any resource
429, 5xx, timeout, no connection           RETRY       the API server is starting or overloaded
=========================================  ==========  ==============================================
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .errors import ApiError, NotFound, ServerError, Timeout, TooManyRequests, TransportError
from .kube import KubeClient, Resource
from .log import get_logger

__all__ = ["NOT_SERVED_MESSAGE", "Verdict", "api_served", "decide", "discovery_path", "served"]

log = get_logger(__name__)

#: The warning a service logs once per optional API it turns off.
NOT_SERVED_MESSAGE = "api not served, feature off"

RETRY_BASE = 0.5
RETRY_MAX = 30.0


class Verdict(enum.Enum):
    SERVED = "served"
    NOT_SERVED = "not served"
    RETRY = "retry"


def discovery_path(resource: Resource) -> str:
    """``/apis/<group>/<version>`` (``/api/v1`` for the core group)."""
    return f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"


def decide(resource: Resource, discovery: Mapping[str, Any] | None, error: BaseException | None) -> Verdict:
    """The verdict on ``resource`` from one discovery answer: the document, or the error it raised."""
    if error is None:
        names = {r.get("name") for r in (discovery or {}).get("resources") or ()}
        return Verdict.SERVED if resource.plural in names else Verdict.NOT_SERVED
    if isinstance(error, NotFound):
        return Verdict.NOT_SERVED
    if isinstance(error, (TransportError, TooManyRequests, ServerError, Timeout)):
        return Verdict.RETRY
    if isinstance(error, ApiError):
        return Verdict.SERVED
    raise error


async def served(kube: KubeClient, resource: Resource, *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> bool:
    """Whether the API server serves ``resource``: asks discovery until the answer is not RETRY (with
    backoff, a warning each time). Cancel to give up."""
    delay = RETRY_BASE
    while True:
        document: dict[str, Any] | None = None
        error: ApiError | TransportError | None = None
        try:
            document = await kube.request("GET", discovery_path(resource))
        except (ApiError, TransportError) as exc:
            error = exc
        verdict = decide(resource, document, error)
        if verdict is not Verdict.RETRY:
            if error is not None and verdict is Verdict.SERVED:
                log.warning("api discovery refused, assuming served", resource=resource.plural,
                            api_version=resource.api_version, error=str(error))
            return verdict is Verdict.SERVED
        log.warning("api discovery failed, retrying", resource=resource.plural,
                    api_version=resource.api_version, error=str(error), retry_in=delay)
        await sleep(delay)
        delay = min(delay * 2, RETRY_MAX)


async def api_served(kube: KubeClient, resource: Resource, gate: str) -> bool:
    """:func:`served`, and when it is not, one warning (:data:`NOT_SERVED_MESSAGE`) naming ``resource``,
    its API version and the feature ``gate`` the caller therefore treats as off for this run."""
    if await served(kube, resource):
        return True
    log.warning(NOT_SERVED_MESSAGE, resource=resource.plural, api_version=resource.api_version, gate=gate)
    return False
