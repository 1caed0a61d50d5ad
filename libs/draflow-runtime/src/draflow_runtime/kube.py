"""A thin asyncio Kubernetes client that speaks plain dicts.

Every answer is decoded with orjson, so objects are exactly the JSON the API server serves (see
``docs/benchmarks.md`` for why: model deserialization costs ~15x more). How a request goes out (the
official client's connection pool and authentication, canonical JSON bodies, 429 retries) is
:mod:`draflow_runtime.kubetransport`; where each kind lives (:class:`Resource`, ``PODS``,
``RESOURCE_CLAIMS``...) is :mod:`draflow_runtime.resources`, re-exported here.

Non-2xx answers raise the typed ``ApiError`` subclasses of :mod:`draflow_runtime.errors`; connection
failures raise ``TransportError``. Both keep the original error as ``__cause__``.

Field validation: the API server silently drops fields it does not know on a write unless the request
asks ``fieldValidation=Strict`` (then: ``400 BadRequest`` naming the field). ``field_validation``
(default ``$DRAFLOW_KUBE_FIELD_VALIDATION``; unset: the server's default, ``Warn``, a response header
nobody reads) is sent on every create, replace and patch (server-side apply and subresources included).
draflow_testenv runs every service and test client with ``Strict``, so a field written under a wrong
name fails a test instead of vanishing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any, Literal

import aiohttp
import orjson
from kubernetes.aio import config as kube_config
from kubernetes.aio.client import ApiClient, Configuration

from .errors import TransportError, api_error_from_status
from .kubetransport import APPLY_CONTENT_TYPE, Transport
from .resources import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    EVENTS,
    EVENTS_V1,
    LEASES,
    NAMESPACES,
    NODES,
    POD_GROUPS,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_POOL_STATUS_REQUESTS,
    RESOURCE_SLICES,
    SERVICE_ACCOUNTS,
    Resource,
)
from .retry import Sleep

__all__ = [
    "DEVICE_CLASSES",
    "DEVICE_TAINT_RULES",
    "EVENTS",
    "EVENTS_V1",
    "FIELD_VALIDATION_ENV",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "POD_GROUPS",
    "RESOURCE_CLAIMS",
    "RESOURCE_CLAIM_TEMPLATES",
    "RESOURCE_POOL_STATUS_REQUESTS",
    "RESOURCE_SLICES",
    "SERVICE_ACCOUNTS",
    "KubeClient",
    "PatchType",
    "Resource",
]

PatchType = Literal["merge", "strategic", "json", "apply"]

#: Environment variable: the ``fieldValidation`` every write of a ``KubeClient`` sends (unset: none).
FIELD_VALIDATION_ENV = "DRAFLOW_KUBE_FIELD_VALIDATION"
_FIELD_VALIDATIONS = ("Strict", "Warn", "Ignore")

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": APPLY_CONTENT_TYPE,
}


def _query(**params: Any) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in params.items() if v is not None and v is not False]


def field_validation_from_env() -> str | None:
    """``$DRAFLOW_KUBE_FIELD_VALIDATION`` (``Strict``, ``Warn`` or ``Ignore``, any case); None when unset
    or empty. Raises ``ValueError`` naming the variable for anything else."""
    raw = os.environ.get(FIELD_VALIDATION_ENV, "").strip()
    return _checked_field_validation(raw) if raw else None


def _checked_field_validation(value: str) -> str:
    for known in _FIELD_VALIDATIONS:
        if value.lower() == known.lower():
            return known
    raise ValueError(f"{FIELD_VALIDATION_ENV}/field_validation must be one of "
                     f"{', '.join(_FIELD_VALIDATIONS)}, not {value!r}")


class KubeClient:
    """Plain-dict client for the Kubernetes API on one ``kubernetes.aio`` ``ApiClient``.

    Safe to share between tasks; one connection pool per client. ``impersonate``/``impersonate_groups``
    add ``Impersonate-User``/``Impersonate-Group`` headers to every request. ``field_validation``
    (``Strict``/``Warn``/``Ignore``; default ``$DRAFLOW_KUBE_FIELD_VALIDATION``, unset: not sent) goes out
    as ``fieldValidation`` on every create, replace and patch.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        impersonate: str | None = None,
        impersonate_groups: list[str] | None = None,
        field_validation: str | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._api = api_client
        self.field_validation = (_checked_field_validation(field_validation) if field_validation
                                 else field_validation_from_env())
        self._transport = Transport(
            api_client, impersonate=impersonate, impersonate_groups=impersonate_groups, sleep=sleep
        )

    @classmethod
    async def from_kubeconfig(
        cls,
        path: str | None = None,
        *,
        context: str | None = None,
        impersonate: str | None = None,
        impersonate_groups: list[str] | None = None,
        field_validation: str | None = None,
    ) -> KubeClient:
        """Connect with the kubeconfig at ``path``.

        ``None`` means ``$KUBECONFIG``, then the in-cluster service account (when
        ``KUBERNETES_SERVICE_HOST`` is set), then ``~/.kube/config``. Raises
        ``kubernetes.aio.config.ConfigException`` when nothing usable is found. No request is made.
        ``context`` picks a kubeconfig context other than the current one. ``field_validation``: as for
        the constructor (None: ``$DRAFLOW_KUBE_FIELD_VALIDATION``).
        """
        configuration = Configuration()
        if path is None:
            path = os.environ.get("KUBECONFIG") or None
        if path is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            kube_config.load_incluster_config(client_configuration=configuration)
        else:
            await kube_config.load_kube_config(
                config_file=path, context=context, client_configuration=configuration, persist_config=False
            )
        return cls(
            ApiClient(configuration), impersonate=impersonate, impersonate_groups=impersonate_groups,
            field_validation=field_validation,
        )

    @property
    def host(self) -> str:
        """Base URL of the API server."""
        return str(self._api.configuration.host)

    async def bearer_token(self) -> str | None:
        """The bearer token this client authenticates with (a token or exec-plugin kubeconfig, in-cluster
        service account; refreshed as for a request), None for client-certificate authentication."""
        value = await self._api.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if not value:
            return None
        scheme, _, token = str(value).partition(" ")
        return token.strip() if scheme.lower() == "bearer" else str(value).strip()

    async def close(self) -> None:
        """Close the connection pool. Idempotent."""
        await self._api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        return await self._transport.call(method, path, query=query, body=body, content_type=content_type)

    def _write_query(self, **params: Any) -> list[tuple[str, Any]]:
        """The query of a create, replace or patch: ``params`` plus ``fieldValidation`` when set."""
        return _query(**params, fieldValidation=self.field_validation)

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

    async def get_text(self, path: str) -> str:
        """GET a path that does not answer JSON (the API server's ``/metrics``, ``/healthz``) as text.

        Raises ``ApiError`` subclasses and ``TransportError`` like every verb."""
        resp = await self._transport.send("GET", path)
        try:
            data = await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TransportError(f"GET {path}: {exc!r}") from exc
        finally:
            resp.release()
        if resp.status >= 400:
            raise api_error_from_status(resp.status, data)
        return data.decode()

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
            "POST", res.path(namespace), query=self._write_query(fieldManager=field_manager), body=body
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
            query=self._write_query(fieldManager=field_manager),
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
        query = self._write_query(fieldManager=field_manager, force=(patch_type == "apply" and force) or None)
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
        resp = await self._transport.send("GET", path, query=query, client_timeout=timeout)
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
