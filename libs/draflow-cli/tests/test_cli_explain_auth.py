"""``draflow explain`` against an allocator endpoint that needs a token (draflow_runtime.httpauth), with the
real kube-apiserver answering the TokenReviews and SubjectAccessReviews: the CLI sends its token (--token,
else the kubeconfig's) and says why it got no explanation when refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from draflow_cli.__main__ import parser, run
from draflow_runtime.httpauth import DelegatedAuth
from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient
from draflow_runtime.observability import ObservabilityServer
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

@pytest.fixture
async def allocator(kube: KubeClient) -> AsyncIterator[str]:
    """An /explain endpoint behind delegated auth, as the allocator serves it (only the route is fake)."""

    async def explain(request: web.Request) -> web.Response:
        claim = f"{request.match_info['namespace']}/{request.match_info['claim']}"
        return web.json_response({"claim": claim, "message": "cannot allocate: no device fits"})

    server = ObservabilityServer(0, auth=DelegatedAuth(kube, cache_seconds=0))
    server.add_route("GET", "/explain/{namespace}/{claim}", explain)
    await server.start()
    yield server.url
    await server.stop()


async def test_explain_sends_a_token_and_says_why_the_allocator_refused(
        testenv: Any, kube: KubeClient, make_namespace: Any, http_user: Any, allocator: str) -> None:
    ns = await make_namespace("cli-auth")
    await kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "stuck"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.x"}}]}},
    }, namespace=ns)

    def args(*extra: str) -> Any:
        return parser().parse_args(["--kubeconfig", str(testenv.kubeconfig), "--allocator-url", allocator,
                                    *extra, "explain", f"{ns}/stuck"])

    # the admin kubeconfig authenticates with a client certificate: no token to send
    out = await run(args())
    assert "HTTP 401" in out and "no token" in out and "no device fits" not in out
    user = await http_user(ns, "cli-user")
    token = user.token
    assert token and token.count(".") == 2  # the kubeconfig's JWT, as sent to the API server
    out = await run(args("--token", token))
    assert "HTTP 403" in out and f"system:serviceaccount:{ns}:cli-user" in out

    await user.grant("draflow-debug-reader")

    async def explained() -> bool:
        return "cannot allocate: no device fits" in await run(args("--token", token))

    await eventually(explained, 20, "the bound reader role lets the CLI read /explain", interval=0.3)
