"""pytest plugin (entry point ``pytest11``): fixtures over the real local environment.

Session scoped: ``testenv`` (the running ``Environment``, started on first use, so unit-only runs start no
server), ``kube`` (admin ``draflow_runtime.kube.KubeClient``), ``nats_url``, ``otlp_receiver`` (a real
OTLP/gRPC receiver in this process). Function scoped: ``make_namespace`` (``await make_namespace()`` -> a
fresh namespace with its ``default`` ServiceAccount, purged after the test), ``run_service``
(``await run_service(argv, env=..., kubeconfig=...)`` -> a process handle, stopped after the test) and
``service_identity`` (runs a test twice: as the admin and under the RBAC ``deploy/kustomize`` grants a
service) and ``http_user`` (a ServiceAccount token for the authenticated HTTP endpoints, granted a reader
role on demand).

A test that uses ``testenv`` (directly or through another fixture) or the e2e ``cluster`` is marked
``integration`` at collection, so ``-m "not integration"`` (``make test-unit``) selects exactly the tests
that start no server. On a failure the report names the environment's logs directory.
``DRAFLOW_TESTENV_STATE_DIR`` pins the state directory (default: a temporary one whose ``logs/`` is kept).
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

if TYPE_CHECKING:
    from draflow_testenv.environment import Environment
    from draflow_testenv.httpuser import HttpUser
    from draflow_testenv.identity import ServiceIdentity
    from draflow_testenv.otlp import OtlpReceiver
    from draflow_testenv.process import ManagedProcess

_ENV: Environment | None = None


def _sigterm_as_interrupt() -> None:
    """Let SIGTERM unwind like Ctrl-C, so fixtures tear down and atexit runs (default SIGTERM skips both)."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        def _handler(signum: int, frame: object) -> None:
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, _handler)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def testenv() -> AsyncIterator[Environment]:
    """The real environment (etcd + kube-apiserver, NATS JetStream, Jaeger v2), once per session.

    Sets ``DRAFLOW_KUBE_FIELD_VALIDATION=Strict`` (unless already set) for this process too: every
    ``KubeClient`` a test makes rejects unknown fields on writes, like the services it starts."""
    global _ENV
    from draflow_testenv.environment import FIELD_VALIDATION_ENV, Environment

    _sigterm_as_interrupt()
    os.environ.setdefault(FIELD_VALIDATION_ENV, "Strict")
    env = Environment(os.environ.get("DRAFLOW_TESTENV_STATE_DIR") or None)
    _ENV = env
    async with env:
        yield env


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def kube(testenv: Environment) -> AsyncIterator[Any]:
    """Admin ``KubeClient`` (client certificate in ``system:masters``), writing with
    ``fieldValidation=Strict``."""
    from draflow_runtime.kube import KubeClient
    from draflow_testenv.environment import FIELD_VALIDATION_ENV

    client = await KubeClient.from_kubeconfig(str(testenv.kubeconfig),
                                              field_validation=testenv.service_env()[FIELD_VALIDATION_ENV])
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def nats_url(testenv: Environment) -> str:
    return testenv.nats_url


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """A real OTLP/gRPC trace receiver: ``.endpoint``, ``.spans``, ``await .wait_for(pred, timeout)``."""
    from draflow_testenv.otlp import OtlpReceiver

    async with OtlpReceiver() as receiver:
        yield receiver


@pytest_asyncio.fixture(loop_scope="session")
async def make_namespace(testenv: Environment) -> AsyncIterator[Callable[..., Awaitable[str]]]:
    """Factory: ``name = await make_namespace("prefix")``; each namespace is purged after the test."""
    created: list[str] = []

    async def _make(prefix: str = "test", *, service_account: bool = True) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        await testenv.admin.ensure_namespace(name)
        created.append(name)
        if service_account:  # no controller creates it here; pods need it (ServiceAccount admission)
            await testenv.admin.ensure_service_account(name, "default")
        return name

    yield _make
    for name in created:
        await testenv.admin.purge_namespace(name)


@pytest_asyncio.fixture(loop_scope="session")
async def run_service(testenv: Environment) -> AsyncIterator[Callable[..., Awaitable[ManagedProcess]]]:
    """Factory: ``proc = await run_service(argv, env={...}, kubeconfig=path, name="allocator")``.

    The process gets KUBECONFIG (admin unless ``kubeconfig``), NATS_URL and OTEL_EXPORTER_OTLP_ENDPOINT,
    logs to ``<logs>/<name>.log``; ``await proc.stop()`` / ``await proc.kill()``; stopped after the test.
    """
    started: list[ManagedProcess] = []

    async def _run(
        argv: Sequence[str], env: Mapping[str, str] | None = None, kubeconfig: str | Path | None = None,
        *, name: str | None = None,
    ) -> ManagedProcess:
        proc = await testenv.run_service(argv, env=env, kubeconfig=kubeconfig, name=name)
        started.append(proc)
        return proc

    yield _run
    for proc in reversed(started):
        await proc.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def http_user(testenv: Environment, kube: Any) -> AsyncIterator[Callable[..., Awaitable[HttpUser]]]:
    """Factory: ``user = await http_user(namespace, name)``: a ServiceAccount and its token for the
    services' authenticated HTTP endpoints; ``await user.grant()`` binds ``draflow-debug-reader`` of
    http-readers.yaml (:mod:`draflow_testenv.httpuser`). Every grant is removed after the test."""
    from draflow_testenv.httpuser import http_user as make

    users: list[HttpUser] = []

    async def _make(namespace: str, name: str) -> HttpUser:
        user = await make(testenv, kube, namespace, name)
        users.append(user)
        return user

    yield _make
    for user in users:
        await user.revoke_all()


@pytest_asyncio.fixture(loop_scope="session", params=["admin", "rbac"])
async def service_identity(
    request: pytest.FixtureRequest, testenv: Environment, kube: Any,
) -> AsyncIterator[Callable[..., Awaitable[ServiceIdentity]]]:
    """Factory: ``who = await service_identity("claim-controller", namespace, node=None)``; give the service
    under test ``who.kube`` (in process) or ``who.kubeconfig`` (``run_service(..., kubeconfig=...)``).

    Parametrized, so every test using it runs twice: ``[admin]`` hands out the admin client (a failure
    there is the service's logic), ``[rbac]`` installs the identity ``deploy/kustomize`` grants the service
    (``draflow_testenv.identity``) and hands out a client with only its ServiceAccount token (a failure
    only there is its RBAC). Test set-up and assertions keep using the admin ``kube``.
    """
    from draflow_testenv.identity import IDENTITIES, ServiceIdentity, install_identity, uninstall_identity

    installed: list[ServiceIdentity] = []

    async def _identity(name: str, namespace: str, *, node: str | None = None) -> ServiceIdentity:
        if name not in IDENTITIES:
            raise KeyError(f"unknown identity {name!r}; known: {sorted(IDENTITIES)}")
        if request.param == "admin":
            return ServiceIdentity(name, namespace, "", testenv.kubeconfig, kube, node)
        identity = await install_identity(testenv, kube, name, namespace, node=node)
        installed.append(identity)
        return identity

    yield _identity
    for identity in reversed(installed):
        await uninstall_identity(kube, identity)


SERVER_FIXTURES = frozenset({"testenv", "cluster"})
"""Fixtures that start servers: a test depending on one, however indirectly, is an integration test."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())) and \
                item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.failed and _ENV is not None:
        report.sections.append(("draflow-testenv", f"server and service logs: {_ENV.logs_dir}"))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _ENV is not None and (terminalreporter.stats.get("failed") or terminalreporter.stats.get("error")):
        terminalreporter.write_line(f"draflow-testenv logs: {_ENV.logs_dir}")
