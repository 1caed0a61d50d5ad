"""The start-up and shut-down every service repeats, once: one async context manager.

::

    async def serve(settings: Settings) -> None:
        async with ServiceContext("claim-controller", settings) as svc:   # tracing, KubeClient
            bus = await svc.connect_bus()          # EventBus (+ the events stream), started
            thing = Thing(svc.kube, bus)
            svc.on_close(thing.stop)               # the service's own pieces
            await svc.serve_http(ready=lambda: svc.standby or thing.synced, routes=[...])
            await svc.lead(thing.run)              # leader election when --leader-elect, else just run

    def main() -> None:
        run_service("claim-controller", Settings, serve)   # settings, logging, signals (service.run)

Every step registers its close as it starts, and leaving the block closes them **in the reverse order of
start**: leader election (lease released) → the service's own pieces → HTTP server → NATS → KubeClient →
tracing flush. That holds however the block is left — cancellation (SIGTERM), an error, or a start-up
that fails half way (a bus that connected is closed). A close step that fails is logged and the
remaining steps still run.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any

from . import lifecycle
from .bus import EventBus
from .busauth import NatsSecurity
from .httpauth import DelegatedAuth, auth_applies
from .kube import KubeClient
from .leader import LEADING, LeaderElector
from .log import get_logger
from .observability import ObservabilityServer, ReadyCheck, RouteHandler
from .settings import ServiceSettings
from .tracing import setup_tracing, shutdown_tracing

__all__ = ["ServiceContext"]

log = get_logger(__name__)

Route = tuple[str, str, RouteHandler]  # (method, path, handler)
CloseFn = Callable[[], Awaitable[Any] | Any]


class ServiceContext:
    """One service process's shared resources (see the module docstring). ``kube`` may be given (tests,
    or a client the caller owns and closes); otherwise one is built from ``settings.kubeconfig``.
    ``tracing=False`` leaves OpenTelemetry alone (tests: the global provider can be set once)."""

    def __init__(self, name: str, settings: ServiceSettings, *, kube: KubeClient | None = None,
                 tracing: bool = True) -> None:
        self.name = name
        self._tracing = tracing
        self.settings = settings
        self._given_kube = kube
        self._kube: KubeClient | None = None
        self.bus: EventBus | None = None
        self.server: ObservabilityServer | None = None
        self.elector: LeaderElector | None = None
        self._stack = contextlib.AsyncExitStack()

    @property
    def kube(self) -> KubeClient:
        if self._kube is None:
            raise RuntimeError("ServiceContext not entered")
        return self._kube

    # -- start / close -----------------------------------------------------------------------------

    async def __aenter__(self) -> ServiceContext:
        try:
            if self._tracing:
                setup_tracing(self.name)
                self.on_close(shutdown_tracing, "tracing")
            if self._given_kube is not None:
                self._kube = self._given_kube
            else:
                self._kube = await KubeClient.from_kubeconfig(self.settings.kubeconfig)
                self.on_close(self._kube.close, "kube client")
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close everything started so far, newest first. Idempotent."""
        stack, self._stack = self._stack, contextlib.AsyncExitStack()
        await stack.aclose()

    def on_close(self, close: CloseFn, what: str = "") -> None:
        """Run ``close()`` (sync or async) at shut-down, before everything registered earlier."""
        label = what or getattr(close, "__qualname__", repr(close))

        async def guarded() -> None:
            try:
                outcome = close()
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as err:  # one failing step must not skip the others
                log.warning("service close step failed", service=self.name, step=label, error=repr(err))

        self._stack.push_async_callback(guarded)

    # -- the shared pieces -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def open_bus(self, *, events_stream: bool = True, linger: float = 0.0) -> AsyncIterator[EventBus]:
        """An ``EventBus`` on ``settings.nats_url`` (credentials and TLS from the ``nats_*`` settings)
        named after the service, started (with the one
        lifecycle events stream declared when ``events_stream``), stopped on exit. For a bus whose life
        is shorter than the process (one leadership term); see :meth:`connect_bus` otherwise. ``linger``:
        :class:`~draflow_runtime.bus.EventBus`'s (published events batched for that many seconds)."""
        bus = EventBus(self.settings.nats_url, name=self.name,
                       security=NatsSecurity.from_settings(self.settings), linger=linger)
        try:
            if events_stream:
                await lifecycle.ensure_events_stream(bus)
            await bus.start()
            yield bus
        finally:
            await bus.stop()

    async def connect_bus(self, *, events_stream: bool = True, linger: float = 0.0) -> EventBus:
        """The process's bus (:meth:`open_bus`), stopped at shut-down. ``bus.enabled`` is False when no
        ``nats_url`` is set."""
        self.bus = await self._stack.enter_async_context(self.open_bus(events_stream=events_stream,
                                                                       linger=linger))
        return self.bus

    async def serve_http(self, ready: ReadyCheck | None = None, routes: Iterable[Route] = ()) -> None:
        """Start the ``/metrics``, ``/healthz``, ``/readyz`` server (plus ``routes``) on
        ``settings.http_port`` (0: none), stopped at shut-down. Unless ``settings.http_auth`` says
        otherwise (:func:`draflow_runtime.httpauth.auth_applies`) every path but the probes (and
        ``/metrics`` unless ``http_metrics_auth``) needs a token the API server authorizes; HTTPS with
        ``http_tls_cert_file``/``http_tls_key_file``."""
        settings = self.settings
        auth = None
        if auth_applies(settings.http_auth, settings.http_host):
            auth = DelegatedAuth(self.kube, cache_seconds=settings.http_auth_cache_seconds)
        tls = None
        if settings.http_tls_cert_file and settings.http_tls_key_file:
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls.load_cert_chain(settings.http_tls_cert_file, settings.http_tls_key_file)
        self.server = ObservabilityServer(settings.http_port, settings.http_host, ready=ready, auth=auth,
                                          protect_metrics=settings.http_metrics_auth, ssl_context=tls)
        for method, path, handler in routes:
            self.server.add_route(method, path, handler)
        if settings.http_port:
            self.on_close(self.server.stop, "http server")
            await self.server.start()

    @property
    def standby(self) -> bool:
        """True while ``--leader-elect`` is on and this replica does not lead (a standby is ready: it
        serves /metrics and waits for the lease)."""
        return self.settings.leader_elect and (self.elector is None or not self.elector.is_leader)

    async def lead(self, term: Callable[[], Awaitable[Any]]) -> None:
        """Run ``term()`` — once, or with ``--leader-elect`` for every leadership term won (the lease is
        released at shut-down). Returns when ``term`` returns (no election) or is cancelled."""
        if not self.settings.leader_elect:
            LEADING.labels(self.settings.leader_election_id).set(1)
            await term()
            return
        self.elector = LeaderElector.from_settings(self.kube, self.settings)
        self.on_close(self.elector.stop, "leader election")
        await self.elector.run_forever(term)

    @staticmethod
    async def wait_forever() -> None:
        """For services whose work runs in background tasks: wait until cancelled (SIGTERM)."""
        await asyncio.Event().wait()
