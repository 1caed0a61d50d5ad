"""The metrics and health HTTP server every service runs (aiohttp).

- ``GET /metrics``: the prometheus_client registry in the Prometheus text format.
- ``GET /healthz``: 200 ``ok`` whenever the event loop answers (liveness).
- ``GET /readyz``: 200 ``ok`` when ``ready()`` returns true (informers synced, leader state...), else 503
  with the reason; no ``ready`` callable means always ready.
- extra routes registered with :meth:`ObservabilityServer.add_route` before :meth:`start` (the
  allocator serves allocation explanations here).

With ``auth`` (:class:`draflow_runtime.httpauth.DelegatedAuth`) every path except ``/healthz`` and
``/readyz`` (and ``/metrics`` unless ``protect_metrics``) needs a bearer token whose user the API server
authorizes for that path: 401 without or with a bad token, 403 when denied.
"""

from __future__ import annotations

import inspect
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from draflow_runtime.httpauth import DelegatedAuth, auth_middleware
from draflow_runtime.log import get_logger

__all__ = ["ObservabilityServer", "ReadyCheck"]

log = get_logger(__name__)

#: ``ready()`` may be sync or async and returns a bool.
ReadyCheck = Callable[[], bool | Awaitable[bool]]
RouteHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: Paths every prober may read without a token.
PROBE_PATHS = frozenset({"/healthz", "/readyz"})


class ObservabilityServer:
    """HTTP server for ``/metrics``, ``/healthz``, ``/readyz`` and extra routes.

    ``port=0`` binds a free port; read :attr:`port` after :meth:`start`. ``auth``: see the module docstring;
    ``ssl_context``: serve HTTPS.
    """

    def __init__(
        self,
        port: int,
        host: str = "127.0.0.1",
        ready: ReadyCheck | None = None,
        *,
        registry: CollectorRegistry = REGISTRY,
        auth: DelegatedAuth | None = None,
        protect_metrics: bool = False,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self._ssl = ssl_context
        self.port = port
        self._ready = ready
        self._registry = registry
        open_paths = PROBE_PATHS if protect_metrics else PROBE_PATHS | {"/metrics"}
        middlewares = [auth_middleware(auth, open_paths.__contains__)] if auth is not None else []
        self._app = web.Application(middlewares=middlewares)
        self._app.router.add_get("/metrics", self._metrics)
        self._app.router.add_get("/healthz", self._healthz)
        self._app.router.add_get("/readyz", self._readyz)
        self._runner: web.AppRunner | None = None

    def add_route(self, method: str, path: str, handler: RouteHandler) -> None:
        """Serve ``handler`` for ``method path`` (aiohttp handler). Only before :meth:`start`."""
        if self._runner is not None:
            raise RuntimeError("add_route after start")
        self._app.router.add_route(method, path, handler)

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8080`` (``https`` with ``ssl_context``)."""
        return f"{'https' if self._ssl else 'http'}://{self.host}:{self.port}"

    async def start(self) -> None:
        """Bind and serve in the background; :attr:`port` is the bound port afterwards."""
        runner = web.AppRunner(self._app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True, ssl_context=self._ssl)
        await site.start()
        self._runner = runner
        address = runner.addresses[0]
        self.port = int(address[1])
        log.info("observability server listening", host=self.host, port=self.port, tls=self._ssl is not None)

    async def stop(self) -> None:
        """Stop serving; in-flight requests are finished first. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _request: web.Request) -> web.Response:
        if self._ready is None:
            return web.Response(text="ok\n")
        try:
            result = self._ready()
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            log.warning("readiness check failed", error=repr(exc))
            return web.Response(status=503, text=f"not ready: {exc!r}\n")
        if result:
            return web.Response(text="ok\n")
        return web.Response(status=503, text="not ready\n")
