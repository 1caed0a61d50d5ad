"""``Environment``: etcd + kube-apiserver, nats-server with JetStream and Jaeger v2, on loopback.

```python
async with Environment() as env:           # temporary state dir; logs kept in env.logs_dir
    env.kubeconfig, env.apiserver_url, env.nats_url, env.otlp_grpc_endpoint, env.jaeger_query_url
    await env.stop_nats(); await env.start_nats()          # same port, same JetStream store
    await env.pause_nats(); env.resume_nats()              # SIGSTOP/SIGCONT: a stalled, still-open server
    path = await env.serviceaccount_kubeconfig("ns", "sa") # a real bound token via TokenRequest
    rev = await env.compact_etcd()                         # compact etcd at its current revision
    await env.crash_apiserver(downtime=2)                  # SIGKILL kube-apiserver, start it again
```

No kube-controller-manager or scheduler runs (draflow plays those roles): namespaces need no controller to
be created, but a deleted one is only removed by ``purge_namespace``; ServiceAccount tokens come from
TokenRequest; pods need the ``default`` ServiceAccount of their namespace (``ensure_service_account``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from draflow_testenv import natssecure, pki, servers
from draflow_testenv.admin import AdminClient, ssl_context
from draflow_testenv.binaries import binary_path, ensure_binary
from draflow_testenv.featuregates import accepted_gates
from draflow_testenv.process import ManagedProcess
from draflow_testenv.statefile import PIDS_FILE

#: draflow_runtime.kube.FIELD_VALIDATION_ENV: the fieldValidation every KubeClient write sends.
FIELD_VALIDATION_ENV = "DRAFLOW_KUBE_FIELD_VALIDATION"


class Environment:
    """The real local environment. Start with ``async with`` (or ``start()``/``stop()``)."""

    def __init__(
        self, state_dir: str | Path | None = None, *, nodes: int = 0, compaction_interval: str = "30s",
        watch_cache: bool = True, uncached_resources: Sequence[str] = ("configmaps",),
        apiserver_args: Sequence[str] = (), startup_timeout: float = 180.0, secure_nats: bool = False,
    ) -> None:
        """``state_dir`` None: a temporary dir whose contents except ``logs/`` are removed at stop.

        ``compaction_interval`` is kube-apiserver's ``--etcd-compaction-interval``. The watch cache serves
        lists and watches at old resourceVersions even after etcd compacted them, so ``compact_etcd()``
        only forces a 410 for resources it does not cache: ``uncached_resources`` (``resource[.group]``,
        default ConfigMaps) or everything with ``watch_cache=False``.
        ``nodes`` is stored for the steps that simulate nodes. ``secure_nats``: nats-server demands TLS and
        a password per service (:mod:`draflow_testenv.natssecure`; the files in ``<state>/nats-secure``).
        """
        self._temporary = state_dir is None
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="draflow-testenv-")).resolve()
        self.nodes = nodes
        self.compaction_interval = compaction_interval
        self.watch_cache = watch_cache
        self.uncached_resources = tuple(uncached_resources)
        self.apiserver_args = tuple(apiserver_args)
        self.startup_timeout = startup_timeout
        self.ports = servers.Ports.allocate()
        self.feature_gates: list[str] = []
        self.rejected_feature_gates: list[str] = []
        self.startup_seconds: float | None = None
        self._procs: dict[str, ManagedProcess] = {}
        self._services: list[ManagedProcess] = []
        self._http: aiohttp.ClientSession | None = None
        self._admin: AdminClient | None = None
        self._ca: pki.KeyPair | None = None
        self._client_ca: pki.KeyPair | None = None  # signs client certificates only
        self._nats_argv: list[str] = []
        self._secure_nats = secure_nats
        self.secure_nats: natssecure.SecureNats | None = None

    # -- addresses -------------------------------------------------------------------------------------
    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (client certificate in ``system:masters``)."""
        return self.state_dir / "kubeconfig"

    @property
    def env_file(self) -> Path:
        return self.state_dir / "env.sh"

    @property
    def apiserver_url(self) -> str:
        return f"https://{servers.HOST}:{self.ports.apiserver}"

    @property
    def etcd_url(self) -> str:
        return f"http://{servers.HOST}:{self.ports.etcd_client}"

    @property
    def nats_url(self) -> str:
        return f"nats://{servers.HOST}:{self.ports.nats}"

    @property
    def otlp_grpc_endpoint(self) -> str:
        """``host:port`` of Jaeger's OTLP/gRPC receiver."""
        return f"{servers.HOST}:{self.ports.otlp_grpc}"

    @property
    def otlp_http_endpoint(self) -> str:
        """``http://host:port`` of Jaeger's OTLP/HTTP receiver (``/v1/traces``)."""
        return f"http://{servers.HOST}:{self.ports.otlp_http}"

    @property
    def jaeger_query_url(self) -> str:
        """Jaeger query HTTP API (``/api/services``, ``/api/traces``, ``/api/v3/...``) and UI."""
        return f"http://{servers.HOST}:{self.ports.jaeger_query_http}"

    @property
    def ca_cert(self) -> Path:
        return self.state_dir / "pki" / "ca.crt"

    @property
    def admin(self) -> AdminClient:
        """The environment's own small admin client (namespaces, ServiceAccounts, tokens)."""
        assert self._admin is not None, "environment not started"
        return self._admin

    # -- life cycle ------------------------------------------------------------------------------------
    async def __aenter__(self) -> Environment:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start every server and wait until each answers; on failure stop what started and raise."""
        t0 = time.monotonic()
        for sub in ("logs", "pki", "kubeconfigs"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        try:
            bins = dict(zip(
                ("etcd", "kube-apiserver", "nats-server", "jaeger"),
                await asyncio.gather(*(ensure_binary(n) for n in
                                       ("etcd", "kube-apiserver", "nats-server", "jaeger"))),
                strict=True,
            ))
            self.feature_gates, self.rejected_feature_gates = await accepted_gates(bins["kube-apiserver"])
            files = self._write_pki()
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._start_control_plane(bins, files))
                tg.create_task(self._start_nats_first(bins["nats-server"]))
                tg.create_task(self._start_jaeger(bins["jaeger"]))
        except BaseException as exc:
            await self.stop()
            if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                raise exc.exceptions[0] from None
            raise
        self.write_env_file()
        self.startup_seconds = time.monotonic() - t0

    async def stop(self) -> None:
        """Stop services first, then the servers (SIGTERM, SIGKILL after a grace). Idempotent."""
        for svc in reversed(self._services):
            await svc.stop()
        self._services.clear()
        apiserver, etcd = self._procs.pop("kube-apiserver", None), self._procs.pop("etcd", None)
        others = list(self._procs.values())
        self._procs.clear()
        await asyncio.gather(*(p.stop() for p in others), *(p.stop() for p in [apiserver] if p))
        if etcd:
            await etcd.stop()
        self._record_pids()
        if self._admin:
            await self._admin.close()
        if self._http:
            await self._http.close()
        if self._temporary:
            for child in self.state_dir.iterdir():
                if child.name != "logs":
                    shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink()

    # -- servers ---------------------------------------------------------------------------------------
    def _write_pki(self) -> servers.ApiserverFiles:
        d = self.state_dir / "pki"
        files, self._ca, self._client_ca = pki.write_apiserver_pki(d, self.apiserver_url, self.kubeconfig)
        ctx = ssl_context(d / "ca.crt", d / "admin.crt", d / "admin.key")
        self._admin = AdminClient(self.apiserver_url, ctx)
        return files

    async def _launch(self, name: str, argv: list[str]) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.logs_dir / f"{name}.log")
        await proc.start()
        self._procs[name] = proc
        self._record_pids()
        return proc

    async def _get_ok(self, url: str) -> bool:
        assert self._http is not None
        async with self._http.get(url) as resp:
            return resp.status == 200

    async def _start_control_plane(self, bins: Mapping[str, Path], files: servers.ApiserverFiles) -> None:
        etcd_argv = servers.etcd_argv(bins["etcd"], self.state_dir / "etcd", self.ports)
        etcd = await self._launch("etcd", etcd_argv)
        await etcd.wait_ready(lambda: self._get_ok(self.etcd_url + "/health"), self.startup_timeout)
        apiserver = await self._launch("kube-apiserver", servers.apiserver_argv(
            bins["kube-apiserver"], files, self.ports, feature_gates=self.feature_gates,
            compaction_interval=self.compaction_interval, watch_cache=self.watch_cache,
            uncached=self.uncached_resources, extra=self.apiserver_args))
        await apiserver.wait_ready(self.admin.ready, self.startup_timeout, interval=0.25)

    async def _start_nats_first(self, binary: Path) -> None:
        self._nats_argv = servers.nats_argv(binary, self.state_dir / "nats", self.ports)
        if self._secure_nats:
            self.secure_nats = natssecure.write_secure_nats(
                self.state_dir / "nats-secure", host=servers.HOST, port=self.ports.nats,
                monitor_port=self.ports.nats_monitor, store_dir=self.state_dir / "nats")
            self._nats_argv = self.secure_nats.argv(binary)
        await self.start_nats()

    async def _start_jaeger(self, binary: Path) -> None:
        config = self.state_dir / "jaeger.yaml"
        config.write_text(servers.jaeger_config(self.ports))
        jaeger = await self._launch("jaeger", servers.jaeger_argv(binary, config))
        await jaeger.wait_ready(lambda: self._get_ok(self.jaeger_query_url + "/api/services"),
                                self.startup_timeout)

    async def stop_nats(self) -> None:
        """Stop nats-server (SIGTERM: JetStream flushes its store), for outage tests."""
        proc = self._procs.pop("nats", None)
        if proc:
            await proc.stop()
            self._record_pids()

    async def pause_nats(self) -> None:
        """SIGSTOP nats-server, returning once it is stopped: clients stay connected, acks time out.
        :meth:`resume_nats` continues it; stopping works either way."""
        await self._procs["nats"].pause()

    def resume_nats(self) -> None:
        """SIGCONT nats-server after :meth:`pause_nats`."""
        self._procs["nats"].resume()

    async def start_nats(self) -> None:
        """(Re)start nats-server on the same port with the same JetStream store; waits for JetStream."""
        if "nats" in self._procs:
            return
        url = f"http://{servers.HOST}:{self.ports.nats_monitor}/healthz?js-enabled-only=true"
        nats = await self._launch("nats", self._nats_argv)
        await nats.wait_ready(lambda: self._get_ok(url), self.startup_timeout)

    async def crash_apiserver(self, downtime: float) -> None:
        """SIGKILL kube-apiserver; ``downtime`` s later start it with the same command; wait till ready."""
        old = self._procs["kube-apiserver"]
        await old.kill()
        await asyncio.sleep(downtime)
        new = old.again()
        await new.start()
        self._procs["kube-apiserver"] = new
        self._record_pids()
        await new.wait_ready(self.admin.ready, self.startup_timeout, interval=0.25)

    async def restart_service(self, old: ManagedProcess) -> ManagedProcess:
        """Start a service of :meth:`run_service` again with the same command; stopped with the env."""
        new = old.again()
        await new.start()
        self._services.append(new)
        self._record_pids()
        return new

    def _record_pids(self) -> None:
        """``<state>/pids.json``: this process and every server's process group, for ``down``."""
        doc = {"owner": os.getpid(),
               "processes": {n: p.pid for n, p in self._procs.items() if p.running},
               "services": {s.name: s.pid for s in self._services if s.running}}
        tmp = self.state_dir / (PIDS_FILE + ".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(self.state_dir / PIDS_FILE)

    # -- test seams ------------------------------------------------------------------------------------
    async def compact_etcd(self) -> int:
        """Compact etcd at its current revision (physically); returns that revision.

        Lists and watches at an older resourceVersion of a resource served from etcd (not watch-cached:
        ``uncached_resources``, default ConfigMaps, or all with ``watch_cache=False``) then fail with
        410 Expired; watch-cached resources keep answering from the cache.
        """
        assert self._http is not None
        async with self._http.post(self.etcd_url + "/v3/kv/range",
                                   json={"key": base64.b64encode(b"\0").decode(), "limit": 1}) as resp:
            rev = int((await resp.json())["header"]["revision"])
        async with self._http.post(self.etcd_url + "/v3/kv/compaction",
                                   json={"revision": rev, "physical": True}) as resp:
            text = await resp.text()
            if resp.status != 200 and "already been compacted" not in text:
                raise RuntimeError(f"etcd compaction at {rev} failed: HTTP {resp.status} {text}")
        return rev

    async def serviceaccount_kubeconfig(
        self, namespace: str, name: str, audiences: list[str] | None = None, *,
        bound_pod: dict[str, Any] | None = None,
    ) -> Path:
        """A kubeconfig authenticating as ``system:serviceaccount:<namespace>:<name>``.

        Creates the namespace and ServiceAccount if missing; the token is a real bound token (24h) from
        the TokenRequest API, audiences defaulting to the API server's. Idempotent. ``bound_pod`` binds
        the token to that pod (see ``AdminClient.token``): a pod on a node gives a node-bound identity.
        """
        await self.admin.ensure_service_account(namespace, name)
        token = await self.admin.token(namespace, name, audiences, bound_pod=bound_pod)
        assert self._ca is not None
        data = pki.kubeconfig(self.apiserver_url, self._ca.cert_pem, user=f"{namespace}-{name}",
                              token=token, namespace=namespace)
        tag = f"-{bound_pod['metadata']['name']}" if bound_pod is not None else ""
        return pki.write_private(self.state_dir / "kubeconfigs" / f"sa-{namespace}-{name}{tag}.yaml", data)

    def user_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A client-certificate kubeconfig for any user and groups (``system:masters`` = admin)."""
        assert self._ca is not None and self._client_ca is not None
        client = pki.make_client_cert(self._client_ca, user, list(groups))
        data = pki.kubeconfig(self.apiserver_url, self._ca.cert_pem, user=user, client=client)
        safe = user.replace(":", "-").replace("/", "-")
        return pki.write_private(self.state_dir / "kubeconfigs" / f"user-{safe}.yaml", data)

    def node_kubeconfig(self, node: str) -> Path:
        """A kubelet identity (``system:node:<node>`` in ``system:nodes``): Node authorizer and
        NodeRestriction apply to it."""
        return self.user_kubeconfig(f"system:node:{node}", ["system:nodes"])

    async def run_service(
        self, argv: Sequence[str], *, name: str | None = None, env: Mapping[str, str] | None = None,
        kubeconfig: str | Path | None = None, cwd: Path | None = None,
    ) -> ManagedProcess:
        """Start a service subprocess with its own identity; log in ``<logs>/<name>.log``.

        Its environment is ours plus KUBECONFIG (``kubeconfig`` or admin), NATS_URL and
        OTEL_EXPORTER_OTLP_ENDPOINT (Jaeger), then ``env``. Stopped by ``stop()`` at the latest.
        """
        base = name or Path(argv[0]).name
        taken = {s.name for s in self._services}
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        full_env = {**os.environ, **self.service_env(), "KUBECONFIG": str(kubeconfig or self.kubeconfig),
                    **(env or {})}
        proc = ManagedProcess(name, argv, self.logs_dir / f"{name}.log", env=full_env, cwd=cwd)
        await proc.start()
        self._services.append(proc)
        self._record_pids()
        return proc

    def service_env(self) -> dict[str, str]:
        """The variables a service (or a shell, via env.sh) needs to reach the environment, and
        ``DRAFLOW_KUBE_FIELD_VALIDATION=Strict`` (unless set otherwise in ours): every write rejects a field
        the API server does not know instead of dropping it silently."""
        return {
            FIELD_VALIDATION_ENV: os.environ.get(FIELD_VALIDATION_ENV) or "Strict",
            "KUBECONFIG": str(self.kubeconfig),
            "NATS_URL": self.nats_url,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{self.otlp_grpc_endpoint}",
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            "JAEGER_URL": self.jaeger_query_url,
            **(self.secure_nats.shell_env() if self.secure_nats is not None else {}),
        }

    def write_env_file(self) -> Path:
        """``<state>/env.sh``: ``source`` it to point kubectl, services and tools at this environment, with
        ``draflow``/``kubectl-draflow`` (this Python's bin directory) and the cached kubectl, when it has
        been built, first on ``PATH`` (the README's examples are typed into a plain shell)."""
        lines = [f"export {k}={v}" for k, v in self.service_env().items()]
        lines.append(f'export PATH="{":".join(shell_path_dirs())}:$PATH"')
        self.env_file.write_text("# draflow-testenv: source this file\n" + "\n".join(lines) + "\n")
        return self.env_file


def shell_path_dirs() -> list[str]:
    """The directories ``env.sh`` puts first on ``PATH``: the ``draflow`` command's, then kubectl's (cached
    by ``make binaries-node``; left out when not built)."""
    dirs = [str(Path(sys.executable).parent)]
    try:
        kubectl = binary_path("kubectl")
    except (OSError, RuntimeError, KeyError):  # no repository or versions file: no pinned kubectl
        return dirs
    if kubectl.is_file():
        dirs.append(str(kubectl.parent))
    return dirs
