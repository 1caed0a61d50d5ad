"""The services' HTTP endpoints behind delegated authentication and authorization, against the real
kube-apiserver: real ServiceAccount tokens (TokenRequest), real TokenReviews and SubjectAccessReviews, and
the ClusterRole ``deploy/kustomize/base/common/http-readers.yaml`` ships for the CLI's users."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from draflow_runtime.servicecontext import ServiceContext
from draflow_runtime.settings import ServiceSettings
from draflow_testenv import pki
from draflow_testenv.servers import free_port
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

READERS = Path(__file__).resolve().parents[3] / "deploy/kustomize/base/common/http-readers.yaml"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


async def _explain(_request: web.Request) -> web.Response:
    return web.json_response({"claims": ["ns-a/secret-claim"]})


async def _get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as resp:
        return resp.status, await resp.text()


@pytest.fixture
async def serve(testenv: Any) -> AsyncIterator[Callable[..., Awaitable[str]]]:
    """Start a ServiceContext HTTP server with ``/explain`` and ``/debug/claims`` on every address (the
    services' default ``--http-host``); returns its loopback base URL."""
    tasks: list[asyncio.Task[None]] = []

    async def _serve(**overrides: Any) -> str:
        settings = ServiceSettings(kubeconfig=str(testenv.kubeconfig), nats_url="",
                                   **{"http_port": free_port(), **overrides})
        started = asyncio.Event()

        async def run() -> None:
            async with ServiceContext("httpauth", settings, tracing=False) as svc:
                await svc.serve_http(routes=[("GET", "/explain", _explain),
                                             ("GET", "/debug/claims", _explain)])
                started.set()
                await svc.wait_forever()

        tasks.append(asyncio.create_task(run()))
        async with asyncio.timeout(30):
            await started.wait()
        return f"http://127.0.0.1:{settings.http_port}"

    yield _serve
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_protected_paths_need_a_token_the_api_server_authorizes(
        testenv: Any, kube: Any, make_namespace: Callable[..., Awaitable[str]],
        serve: Callable[..., Awaitable[str]]) -> None:
    base = await serve(http_auth_cache_seconds=0.5)
    namespace = await make_namespace("httpauth")
    await testenv.admin.ensure_service_account(namespace, "reader")
    token = await testenv.admin.token(namespace, "reader")

    # probes and (by default) metrics stay open
    assert (await _get(base + "/healthz"))[0] == 200
    assert (await _get(base + "/readyz"))[0] == 200
    assert (await _get(base + "/metrics"))[0] == 200
    # no token, a token the API server does not know: 401 and the claims are not shown
    status, body = await _get(base + "/explain")
    assert (status, "secret-claim" in body) == (401, False)
    assert (await _get(base + "/explain", token="not-a-token"))[0] == 401
    # a real ServiceAccount without the role: 403 naming the user and the path
    status, body = await _get(base + "/explain", token=token)
    assert status == 403, body
    assert f"system:serviceaccount:{namespace}:reader" in body and '"/explain"' in body
    assert (await _get(base + "/debug/claims", token=token))[0] == 403

    # the shipped reader role, bound to that ServiceAccount: 200
    role = next(d for d in yaml.safe_load_all(READERS.read_text())
                if d["metadata"]["name"] == "draflow-debug-reader")
    name = f"draflow-debug-reader-{uuid.uuid4().hex[:6]}"
    role["metadata"] = {"name": name}
    await kube.request("POST", f"{RBAC}/clusterroles", body=role)
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]}
    await kube.request("POST", f"{RBAC}/clusterrolebindings", body=binding)
    try:
        async def allowed() -> bool:  # the denials above are reused for http_auth_cache_seconds
            return all([(await _get(base + path, token=token))[0] == 200
                        for path in ("/explain", "/debug/claims")])

        await eventually(allowed, 20, "the bound reader role lets the token read both paths", interval=0.3)
        status, body = await _get(base + "/debug/claims", token=token)
        assert (status, "secret-claim" in body) == (200, True)
        # the role grants reading only, and nothing else
        assert (await _get(base + "/metrics-other", token=token))[0] == 403
    finally:
        await kube.request("DELETE", f"{RBAC}/clusterrolebindings/{name}")
        await kube.request("DELETE", f"{RBAC}/clusterroles/{name}")


async def test_metrics_can_be_protected_too(serve: Callable[..., Awaitable[str]]) -> None:
    base = await serve(http_metrics_auth=True)
    assert (await _get(base + "/metrics"))[0] == 401
    assert (await _get(base + "/healthz"))[0] == 200


async def test_a_loopback_only_server_needs_no_token_by_default(
        serve: Callable[..., Awaitable[str]]) -> None:
    base = await serve(http_host="127.0.0.1")
    status, body = await _get(base + "/explain")
    assert (status, "secret-claim" in body) == (200, True)
    # --http-auth on protects a loopback server as well
    base = await serve(http_host="127.0.0.1", http_auth="on")
    assert (await _get(base + "/explain"))[0] == 401


async def test_https_keeps_the_token_off_the_wire_and_the_checks_apply(
        tmp_path: Path, serve: Callable[..., Awaitable[str]]) -> None:
    ca = pki.make_ca("httpauth-test-ca")
    cert = pki.make_serving_cert(ca, ["localhost"], ["127.0.0.1"])
    pems = {"ca.crt": ca.cert_pem, "tls.crt": cert.cert_pem, "tls.key": cert.key_pem}
    files = {name: pki.write_private(tmp_path / name, data) for name, data in pems.items()}
    base = await serve(http_tls_cert_file=str(files["tls.crt"]), http_tls_key_file=str(files["tls.key"]))
    https = base.replace("http://", "https://")
    trust = ssl.create_default_context(cafile=str(files["ca.crt"]))
    async with aiohttp.ClientSession() as http:
        async with http.get(https + "/healthz", ssl=trust) as resp:
            assert resp.status == 200
        async with http.get(https + "/explain", ssl=trust) as resp:
            assert resp.status == 401
        with pytest.raises(aiohttp.ClientError):  # plain HTTP is not served
            async with http.get(base + "/healthz") as resp:
                await resp.read()
