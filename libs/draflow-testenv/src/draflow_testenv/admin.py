"""A minimal admin HTTP client for the environment's own chores (ServiceAccounts, tokens, namespaces).

Deliberately independent of ``draflow_runtime.kube`` so the test environment keeps working while the client
under test is broken. Services and tests use ``KubeClient``; only the environment uses this.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path
from typing import Any

import aiohttp


class AdminError(RuntimeError):
    """A non-2xx answer from the API server."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


def ssl_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert and key:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


class AdminClient:
    def __init__(self, server: str, ctx: ssl.SSLContext) -> None:
        self.server = server.rstrip("/")
        self._ssl = ctx
        self._session: aiohttp.ClientSession | None = None
        self._namespaced: list[str] | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl),
                timeout=aiohttp.ClientTimeout(total=30),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        async with self._http().request(
            method, self.server + path, json=body, params=params,
            headers={"Content-Type": content_type} if body is not None else None,
        ) as resp:
            text = await resp.text()
            if resp.status >= 300:
                raise AdminError(method, path, resp.status, text)
            return await resp.json(content_type=None) if text else None

    async def ready(self) -> bool:
        async with self._http().get(self.server + "/readyz") as resp:
            return resp.status == 200

    async def ensure(self, path: str, body: dict[str, Any]) -> None:
        """Create ``body`` at collection ``path``; an existing object is fine (idempotent)."""
        try:
            await self.request("POST", path, body)
        except AdminError as exc:
            if exc.status != 409:
                raise

    async def ensure_namespace(self, name: str) -> None:
        await self.ensure("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": name}})

    async def ensure_service_account(self, namespace: str, name: str) -> None:
        await self.ensure_namespace(namespace)
        await self.ensure(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                          {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})

    async def token(
        self, namespace: str, name: str, audiences: list[str] | None = None, expiration: int = 86400,
        *, bound_pod: dict[str, Any] | None = None,
    ) -> str:
        """A bound ServiceAccount token from the TokenRequest API.

        ``bound_pod`` (a Pod object of that ServiceAccount) binds the token to the pod, as the kubelet's
        projected token is: valid only while the pod exists, and for a pod with ``spec.nodeName`` the API
        server adds the user extras ``authentication.kubernetes.io/node-name`` and ``node-uid``.
        """
        spec: dict[str, Any] = {"expirationSeconds": expiration}
        if audiences:
            spec["audiences"] = audiences
        if bound_pod is not None:
            meta = bound_pod["metadata"]
            spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                      "uid": meta["uid"]}
        tr = await self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        return str(tr["status"]["token"])

    async def _namespaced_collections(self) -> list[str]:
        """URL prefixes (``/api/v1`` or ``/apis/g/v`` + ``/namespaces/{ns}/<resource>`` template parts)."""
        if self._namespaced is None:
            versions = ["/api/v1"]
            groups = await self.request("GET", "/apis")
            versions += [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups["groups"]]
            out = []
            for v in versions:
                for r in (await self.request("GET", v))["resources"]:
                    if r["namespaced"] and "/" not in r["name"] and "deletecollection" in r["verbs"]:
                        out.append(f"{v}/namespaces/{{ns}}/{r['name']}")
            self._namespaced = out
        return self._namespaced

    async def _purge_collection(self, coll: str, opts: dict[str, Any]) -> None:
        with contextlib.suppress(AdminError):
            await self.request("DELETE", coll, opts)
        try:
            items = (await self.request("GET", coll))["items"]
        except AdminError:
            return
        for obj in items:
            path = f"{coll}/{obj['metadata']['name']}"
            with contextlib.suppress(AdminError):
                if obj["metadata"].get("finalizers"):
                    await self.request("PATCH", path, {"metadata": {"finalizers": None}},
                                       content_type="application/merge-patch+json")
                await self.request("DELETE", path, opts)

    async def purge_namespace(self, name: str) -> None:
        """Delete a namespace and everything in it now, doing the namespace controller's job.

        No kube-controller-manager runs here, so without this a deleted namespace would stay Terminating
        and its objects would remain visible to cluster-wide watches. Finalizers of leftover objects are
        removed (a test that cares about finalizers must finish before its namespace is purged).
        Idempotent: purging a missing namespace succeeds.
        """
        with contextlib.suppress(AdminError):
            await self.request("DELETE", f"/api/v1/namespaces/{name}")
        opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "propagationPolicy": "Background"}
        collections = [c.format(ns=name) for c in await self._namespaced_collections()]
        await asyncio.gather(*(self._purge_collection(c, opts) for c in collections))
        try:
            ns = await self.request("GET", f"/api/v1/namespaces/{name}")
        except AdminError as exc:
            if exc.status == 404:
                return
            raise
        ns["spec"]["finalizers"] = []
        with contextlib.suppress(AdminError):
            await self.request("PUT", f"/api/v1/namespaces/{name}/finalize", ns)
