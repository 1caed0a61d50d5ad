"""A thin asyncio Kubernetes client that speaks plain dicts.

Configuration (kubeconfig with client certificates, bearer tokens, CA data; in-cluster service account),
authentication headers and the HTTP connection pool come from the official client's asyncio API
(``kubernetes.aio``). Every answer is decoded with orjson, so objects are exactly the JSON the API server
serves (see ``docs/benchmarks.md`` for why: model deserialization costs ~15x more).

Every request body (create, update, every patch type, server-side apply, subresources, the ``request``
escape hatch) is encoded here, once, as canonical JSON (:func:`draflow_runtime.gojson.dumps`: the bytes
Go's ``encoding/json`` writes). The official client would ``json.dumps`` it with ``", "``/``": "``
separators and ASCII escapes, and the API server keeps raw JSON fields (``RawExtension``: opaque driver
parameters) byte for byte: bytes it would not write itself make every later write of the object look
like a change of an immutable field (``422 field is immutable``). So requests go out on the official
client's connection pool directly (``ApiClient.param_serialize`` for URL and auth, then the pool's
``request``), not through its ``RESTClientObject``, which re-encodes any body it is given.

Non-2xx answers raise the typed ``ApiError`` subclasses of :mod:`draflow_runtime.errors`; connection
failures raise ``TransportError``. Both keep the original error as ``__cause__``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import orjson
import structlog
from kubernetes.aio import config as kube_config
from kubernetes.aio.client import ApiClient, Configuration
from multidict import CIMultiDict

from . import gojson
from .errors import TransportError, api_error_from_status
from .retry import THROTTLE_RETRIES, Sleep, throttle_retry_wait

__all__ = [
    "DEVICE_CLASSES",
    "DEVICE_TAINT_RULES",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "RESOURCE_CLAIMS",
    "RESOURCE_CLAIM_TEMPLATES",
    "RESOURCE_POOL_STATUS_REQUESTS",
    "RESOURCE_SLICES",
    "SERVICE_ACCOUNTS",
    "KubeClient",
    "PatchType",
    "Resource",
]

log = structlog.get_logger(__name__)

PatchType = Literal["merge", "strategic", "json", "apply"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives in the API: group, version, plural and whether it is namespaced."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``apiVersion`` as written in objects: ``v1`` or ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """URL path of the collection (``name=None``) or of one object/subresource.

        ``namespace=None`` on a namespaced resource addresses all namespaces (list/watch only).
        Raises ``ValueError`` for a namespace on a cluster-scoped resource.
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None:
            if not self.namespaced:
                raise ValueError(f"{self.kind} is cluster-scoped; no namespace allowed")
            base = f"{base}/namespaces/{namespace}"
        path = f"{base}/{self.plural}"
        if name is not None:
            path = f"{path}/{name}"
            if subresource:
                path = f"{path}/{subresource}"
        return path


PODS = Resource("", "v1", "pods", "Pod", True)
NODES = Resource("", "v1", "nodes", "Node", False)
EVENTS = Resource("", "v1", "events", "Event", True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
# resource.k8s.io/v1 since 1.37 (DRADeviceTaintRules GA; verified in v1.37.1 discovery); 1.36: v1beta2 only.
DEVICE_TAINT_RULES = Resource("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", False)
# resource.k8s.io/v1alpha3 only (DRAResourcePoolStatus, alpha in 1.36 and 1.37).
RESOURCE_POOL_STATUS_REQUESTS = Resource(
    "resource.k8s.io", "v1alpha3", "resourcepoolstatusrequests", "ResourcePoolStatusRequest", False
)


# What the official client uses when a request has no timeout of its own.
_DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total=5 * 60)


def _query(**params: Any) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in params.items() if v is not None and v is not False]


class KubeClient:
    """Plain-dict client for the Kubernetes API on one ``kubernetes.aio`` ``ApiClient``.

    Safe to share between tasks; one connection pool per client. ``impersonate``/``impersonate_groups``
    add ``Impersonate-User``/``Impersonate-Group`` headers to every request.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        impersonate: str | None = None,
        impersonate_groups: list[str] | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._api = api_client
        self._sleep = sleep  # seam: tests record the waits a 429 asks for
        self._impersonate = impersonate
        self._impersonate_groups = list(impersonate_groups or [])

    @classmethod
    async def from_kubeconfig(
        cls,
        path: str | None = None,
        *,
        impersonate: str | None = None,
        impersonate_groups: list[str] | None = None,
    ) -> KubeClient:
        """Connect with the kubeconfig at ``path``.

        ``None`` means ``$KUBECONFIG``, then the in-cluster service account (when
        ``KUBERNETES_SERVICE_HOST`` is set), then ``~/.kube/config``. Raises
        ``kubernetes.aio.config.ConfigException`` when nothing usable is found. No request is made.
        """
        configuration = Configuration()
        if path is None:
            path = os.environ.get("KUBECONFIG") or None
        if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            kube_config.load_incluster_config(client_configuration=configuration)
        else:
            await kube_config.load_kube_config(
                config_file=path, client_configuration=configuration, persist_config=False
            )
        return cls(
            ApiClient(configuration), impersonate=impersonate, impersonate_groups=impersonate_groups
        )

    @property
    def host(self) -> str:
        """Base URL of the API server."""
        return str(self._api.configuration.host)

    async def close(self) -> None:
        """Close the connection pool. Idempotent."""
        await self._api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- transport -------------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        client_timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """Send one request; return the open response (status not checked yet).

        ``body``: ``bytes`` go out as they are (already encoded), anything else as canonical JSON
        (for a server-side apply, which the server reads as YAML, with the characters YAML refuses escaped).
        """
        headers: dict[str, str] = {"Accept": "application/json"}
        data: bytes | None = None
        if body is not None:
            content_type = content_type or "application/json"
            data = gojson.request_body(body, yaml=content_type.startswith(_PATCH_CONTENT_TYPES["apply"]))
            headers["Content-Type"] = content_type
        method, url, header_params, _, _ = await self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or None,
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        all_headers: CIMultiDict[str] = CIMultiDict(header_params)
        if self._impersonate:
            all_headers["Impersonate-User"] = self._impersonate
            for group in self._impersonate_groups:
                all_headers.add("Impersonate-Group", group)
        try:
            return await self._session().request(
                method, url, headers=all_headers, data=data, timeout=client_timeout or _DEFAULT_TIMEOUT,
                **self._connection_options(),
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TransportError(f"{method} {path}: {exc!r}") from exc

    def _session(self) -> aiohttp.ClientSession:
        """The official client's connection pool (TLS, proxy environment), created on first use."""
        rest = self._api.rest_client
        if rest.pool_manager is None:
            rest.pool_manager = rest._create_pool_manager()
        return rest.pool_manager

    def _connection_options(self) -> dict[str, Any]:
        """Per-request options the official client adds from its configuration (proxy, TLS SNI)."""
        configuration = self._api.configuration
        options: dict[str, Any] = {}
        if configuration.tls_server_name:
            options["server_hostname"] = configuration.tls_server_name
        if configuration.proxy:
            options["proxy"] = configuration.proxy
        if configuration.proxy_headers:
            options["proxy_headers"] = configuration.proxy_headers
        return options

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        for attempt in range(THROTTLE_RETRIES + 1):
            resp = await self._send(method, path, query=query, body=body, content_type=content_type)
            try:
                data = await resp.read()
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise TransportError(f"{method} {path}: {exc!r}") from exc
            finally:
                resp.release()
            if resp.status < 400:
                break
            err = api_error_from_status(resp.status, data)
            wait = throttle_retry_wait(resp.status, resp.headers.get("Retry-After"), err.details, attempt)
            if wait is None:
                raise err
            log.info("request throttled, retrying", method=method, path=path, wait=wait, attempt=attempt + 1)
            await self._sleep(wait)
        if not data:
            return {}
        decoded = orjson.loads(data)
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    # -- verbs -----------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | list[tuple[str, Any]] | None = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        """Escape hatch: any request, JSON body in (``bytes``: already encoded), decoded JSON out.

        Raises ``ApiError`` subclasses and ``TransportError`` like every verb.
        """
        q = list(query.items()) if isinstance(query, dict) else query
        return await self._call(method.upper(), path, query=q, body=body, content_type=content_type)

    async def get(
        self, res: Resource, name: str, namespace: str | None = None, subresource: str | None = None
    ) -> dict[str, Any]:
        """Read one object. Raises ``NotFound``."""
        return await self._call("GET", res.path(namespace, name, subresource))

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> dict[str, Any]:
        """One page of a list: the List (``items``, ``metadata.resourceVersion``, ``metadata.continue``).

        ``kind``/``apiVersion`` are filled in on the items (the server omits them in lists) so every
        object is self-describing. Raises ``Gone`` when ``continue_`` has expired.
        """
        query = _query(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            resourceVersion=resource_version,
            limit=limit,
            **{"continue": continue_},
        )
        result = await self._call("GET", res.path(namespace), query=query)
        for item in result.get("items") or ():
            item.setdefault("kind", res.kind)
            item.setdefault("apiVersion", res.api_version)
        return result

    async def create(
        self,
        res: Resource,
        body: dict[str, Any],
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """Create ``body`` (``namespace`` defaults to ``body.metadata.namespace``).

        Not idempotent: raises ``AlreadyExists`` when the name is taken, ``Invalid`` on validation errors.
        """
        if namespace is None and res.namespaced:
            namespace = body.get("metadata", {}).get("namespace")
        return await self._call(
            "POST", res.path(namespace), query=_query(fieldManager=field_manager), body=body
        )

    async def replace(
        self,
        res: Resource,
        body: dict[str, Any],
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT ``body`` (name/namespace from its metadata). With ``metadata.resourceVersion`` set this is a
        compare-and-swap: raises ``Conflict`` when the object changed since that version."""
        meta = body.get("metadata", {})
        namespace = meta.get("namespace") if res.namespaced else None
        return await self._call(
            "PUT",
            res.path(namespace, meta["name"], subresource),
            query=_query(fieldManager=field_manager),
            body=body,
        )

    async def patch(
        self,
        res: Resource,
        name: str,
        body: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """Patch an object. ``patch_type``: ``merge`` (RFC 7386), ``strategic``, ``json`` (RFC 6902, body
        is a list of operations) or ``apply`` (server-side apply: ``field_manager`` required, ``force``
        takes over conflicting fields). Raises ``NotFound``, ``Conflict``, ``Invalid``."""
        try:
            content_type = _PATCH_CONTENT_TYPES[patch_type]
        except KeyError:
            raise ValueError(f"unknown patch type {patch_type!r}") from None
        if patch_type == "apply" and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        query = _query(fieldManager=field_manager, force=(patch_type == "apply" and force) or None)
        # An apply patch is YAML; JSON is YAML, so the body goes out as canonical JSON like the others.
        return await self._call(
            "PATCH",
            res.path(namespace, name, subresource),
            query=query,
            body=body,
            content_type=content_type,
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        preconditions: dict[str, str] | None = None,
        grace_period_seconds: int | None = None,
    ) -> dict[str, Any]:
        """Delete one object; returns the server's answer (the object while finalizers hold it, or a
        ``Status``). ``preconditions={"uid": ..., "resourceVersion": ...}`` make it conditional
        (``Conflict`` when they do not match). Raises ``NotFound`` when it is already gone."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return await self._call("DELETE", res.path(namespace, name), body=options)

    async def delete_collection(
        self,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> dict[str, Any]:
        """Delete every matching object. Idempotent: nothing matching is not an error."""
        query = _query(labelSelector=label_selector, fieldSelector=field_selector)
        return await self._call("DELETE", res.path(namespace), query=query)

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Stream ``(type, object)`` from ``resource_version`` on.

        ``type`` is ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK`` (a BOOKMARK object carries only
        ``metadata.resourceVersion``). Ends normally when the server closes the stream (its timeout);
        the caller re-watches from the last resourceVersion it saw. An ``ERROR`` event or an HTTP error
        raises the typed ``ApiError`` (``Gone`` for an expired resourceVersion: relist); a broken
        connection raises ``TransportError``.
        """
        query = _query(
            watch="true",
            resourceVersion=resource_version,
            allowWatchBookmarks="true" if allow_bookmarks else None,
            labelSelector=label_selector,
            fieldSelector=field_selector,
            timeoutSeconds=timeout_seconds,
        )
        # No total timeout; a read timeout well past the server-side timeout detects dead connections.
        read_timeout = None if timeout_seconds is None else timeout_seconds + 30
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=read_timeout)
        path = res.path(namespace)
        resp = await self._send("GET", path, query=query, client_timeout=timeout)
        try:
            if resp.status >= 400:
                raise api_error_from_status(resp.status, await resp.read())
            while True:
                try:
                    line = await resp.content.readline()
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    raise TransportError(f"watch {path}: {exc!r}") from exc
                if not line:
                    return
                if not line.strip():
                    continue
                event = orjson.loads(line)
                etype = event.get("type")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    raise api_error_from_status(int(obj.get("code") or 500), obj)
                yield etype, obj
        finally:
            resp.close()
