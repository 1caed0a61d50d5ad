"""``ClusterEnvironment``: the ``Environment`` plus a real cluster around it on this machine.

```python
async with ClusterEnvironment() as env:      # needs root (containerd, the kubelet, cgroups, mounts)
    env.node.name                            # a real Node, Ready; its kubelet runs real containers
    await env.import_image(archive)          # an OCI archive into every node's containerd
async with ClusterEnvironment(node_names=["draflow-node-1", "draflow-node-2"]) as env:
    env.node_layouts                         # two real Nodes on this machine
```

On top of etcd + kube-apiserver + NATS + Jaeger it runs kube-controller-manager (its usual controllers,
without the resourceclaim and device-taint-eviction controllers: draflow's claim-controller does their
jobs), kube-scheduler, and one node or more: each a containerd 2.x (CRI with CDI) and a kubelet of its own,
with paths (``<root>/<node name>``), ports, node address, cgroup parent and CNI bridge of their own
(``draflow_testenv.node``). Nodes share only what is fixed on the host: runc's state root
(``/run/containerd/runc``, container IDs are unique), ``/var/log/containers`` and ``/var/lib/cni/results``
(names carry the container or network), the kubelets' iptables canary chains. The first node's processes log
to ``kubelet.log`` and ``containerd.log``, another's to ``kubelet-<name>.log``. Images come from
``draflow_testenv.images``; nothing is pulled. ``stop()`` leaves no process, mount, container, cgroup or
bridge behind (``node_cleanup``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from draflow_testenv import images, node_cleanup, servers
from draflow_testenv.binaries import ensure_binary
from draflow_testenv.environment import Environment
from draflow_testenv.node import (
    NodeLayout,
    cni_config,
    containerd_argv,
    containerd_config,
    kubelet_argv,
    kubelet_config,
)
from draflow_testenv.process import ManagedProcess

NODE_BINARIES = ("kubelet", "kube-scheduler", "kube-controller-manager", "containerd", "cni-plugins", "pause")
# kube-controller-manager's controllers: all of its defaults but the two draflow's claim-controller replaces.
KCM_CONTROLLERS = "*,-resourceclaim-controller,-device-taint-eviction-controller"
RUNC = Path("/usr/sbin/runc")  # the Debian package hack/node-packages.sh installs


class ClusterEnvironment(Environment):
    """A real one-node cluster. Must run as root. Start with ``async with`` (or ``start()``/``stop()``)."""

    def __init__(self, state_dir: str | Path | None = None, *, node_name: str = "draflow-node-1",
                 node_names: Sequence[str] | None = None, node_ready_timeout: float = 180.0,
                 apiserver_args: Sequence[str] = (), **kwargs: Any) -> None:
        # The API server reaches kubelets (logs, exec) at the node's address; its name resolves nowhere.
        apiserver_args = ("--kubelet-preferred-address-types=InternalIP", *apiserver_args)
        super().__init__(state_dir, apiserver_args=apiserver_args, **kwargs)
        self.node_names = list(node_names or [node_name])
        self.node_name = self.node_names[0]
        self.node_ready_timeout = node_ready_timeout
        self._layouts: list[NodeLayout] = []
        self._bins: dict[str, Path] = {}
        self._node_procs: dict[str, ManagedProcess] = {}
        self.cluster_startup_seconds: float | None = None

    @property
    def node(self) -> NodeLayout:
        """The first node."""
        assert self._layouts, "cluster not started"
        return self._layouts[0]

    @property
    def node_layouts(self) -> list[NodeLayout]:
        assert self._layouts, "cluster not started"
        return list(self._layouts)

    def layout(self, name: str) -> NodeLayout:
        """The node called ``name``."""
        [found] = [n for n in self.node_layouts if n.name == name]
        return found

    def _proc(self, kind: str, layout: NodeLayout) -> str:
        """``kubelet`` / ``containerd`` for the first node, ``<kind>-<node name>`` for the others."""
        return kind if layout is self._layouts[0] else f"{kind}-{layout.name}"

    def kubelet_log(self, layout: NodeLayout | None = None) -> Path:
        """The kubelet's own log file (the first node's by default)."""
        return self.logs_dir / f"{self._proc('kubelet', layout or self.node)}.log"

    @property
    def ctr(self) -> Path:
        """containerd's ``ctr`` client (beside the containerd binary)."""
        return self._bins["containerd"].parent / "ctr"

    async def start(self) -> None:
        if os.geteuid() != 0:
            raise PermissionError("ClusterEnvironment runs containerd and a kubelet: it needs root")
        await super().start()
        t0 = time.monotonic()
        try:
            bins = await asyncio.gather(*(ensure_binary(n) for n in NODE_BINARIES))
            self._bins = dict(zip(NODE_BINARIES, bins, strict=True))
            self._layouts = NodeLayout.create_all(self.state_dir, self.node_names)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._start_controllers())
                archives = await asyncio.gather(  # once for all nodes (cached by content)
                    images.pause_archive(self._bins["pause"]), images.workload_archive())
                for layout in self._layouts:
                    tg.create_task(self._start_node(layout, archives))
        except BaseException as exc:
            await self.stop()
            if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                raise exc.exceptions[0] from None
            raise
        self.cluster_startup_seconds = time.monotonic() - t0

    async def stop(self) -> None:
        """The nodes first (kubelets, then containers, containerd, mounts, cgroups, bridge), then the rest."""
        for svc in reversed(self._services):
            await svc.stop()
        self._services.clear()
        kubelets = [self._procs.pop(self._proc("kubelet", n), None) for n in self._layouts]
        await asyncio.gather(*(k.stop(grace=15.0) for k in kubelets if k))
        await asyncio.gather(*(self._stop_node(n) for n in self._layouts))
        if self._layouts and self._layouts[0].link is not None:  # the nodes' root is elsewhere: remove both
            self._layouts[0].link.unlink(missing_ok=True)
            await asyncio.to_thread(shutil.rmtree, self._layouts[0].root, True)
        await super().stop()

    async def _stop_node(self, layout: NodeLayout) -> None:
        """After its kubelet: the node's containers, its containerd, then whatever is left of it."""
        containerd = self._procs.pop(self._proc("containerd", layout), None)
        if containerd and containerd.running:
            await node_cleanup.remove_containers(self.ctr, layout.containerd_socket)
        if containerd:
            await containerd.stop()
        await asyncio.to_thread(node_cleanup.clean_node, layout)

    # -- control plane ---------------------------------------------------------------------------------
    async def _start_controllers(self) -> None:
        pki = self.state_dir / "pki"
        kcm_port, sched_port = servers.free_port(), servers.free_port()
        kcm = await self._launch("kube-controller-manager", [
            str(self._bins["kube-controller-manager"]), f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
            f"--controllers={KCM_CONTROLLERS}", f"--root-ca-file={pki / 'ca.crt'}",
            f"--service-account-private-key-file={pki / 'sa.key'}", "--use-service-account-credentials=false",
            "--leader-elect=false", f"--bind-address={servers.HOST}", f"--secure-port={kcm_port}",
            "--node-monitor-grace-period=40s", "--v=1",
        ])
        sched = await self._launch("kube-scheduler", [
            str(self._bins["kube-scheduler"]), f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false", f"--bind-address={servers.HOST}", f"--secure-port={sched_port}", "--v=1",
        ])
        await kcm.wait_ready(lambda: self._get_ok_insecure(f"https://{servers.HOST}:{kcm_port}/healthz"),
                             self.startup_timeout, interval=0.5)
        await sched.wait_ready(lambda: self._get_ok_insecure(f"https://{servers.HOST}:{sched_port}/healthz"),
                               self.startup_timeout, interval=0.5)

    async def _get_ok_insecure(self, url: str) -> bool:
        assert self._http is not None
        async with self._http.get(url, ssl=False) as resp:
            return resp.status == 200

    # -- the node --------------------------------------------------------------------------------------
    async def _start_node(self, layout: NodeLayout, archives: Sequence[Path]) -> None:
        for d in (layout.containerd_dir, layout.cni_conf_dir, layout.cdi_dir, layout.kubelet_root):
            d.mkdir(parents=True, exist_ok=True)
        if layout.link is not None and not layout.link.is_symlink():
            layout.link.parent.mkdir(parents=True, exist_ok=True)
            layout.link.symlink_to(layout.root)
        layout.containerd_config.write_text(containerd_config(
            layout, cni_bin_dir=self._bins["cni-plugins"].parent, runc=RUNC,
            sandbox_image=images.PAUSE_IMAGE))
        (layout.cni_conf_dir / "10-draflow.conflist").write_text(cni_config(layout))
        env = {**os.environ, "PATH": f"{self._bins['containerd'].parent}:{os.environ.get('PATH', '')}"}
        name = self._proc("containerd", layout)
        proc = ManagedProcess(name, containerd_argv(self._bins["containerd"], layout),
                              self.logs_dir / f"{name}.log", env=env)
        await proc.start()
        self._procs[name] = proc
        self._record_pids()
        await proc.wait_ready(lambda: self._containerd_ready(layout), self.startup_timeout, interval=0.25)
        for archive in archives:
            await images.import_archive(self.ctr, layout.containerd_socket, archive)
        layout.kubelet_config.write_text(kubelet_config(layout))
        node_cleanup.create_cgroups(layout.cgroup_root)
        node_cleanup.add_node_address(layout)
        layout.kubelet_kubeconfig.write_bytes(self.node_kubeconfig(layout.name).read_bytes())
        await self._start_kubelet(layout)

    async def _start_kubelet(self, layout: NodeLayout) -> None:
        argv = kubelet_argv(self._bins["kubelet"], layout)
        kubelet = await self._launch(self._proc("kubelet", layout), argv)
        await kubelet.wait_ready(lambda: self.node_ready(layout.name), self.node_ready_timeout, interval=0.5)

    async def _containerd_ready(self, layout: NodeLayout) -> bool:
        await images.run([self.ctr, "--address", layout.containerd_socket, "version"])
        return True

    async def import_image(self, archive: Path) -> None:
        """Load an OCI image archive into every node's containerd (namespace ``k8s.io``)."""
        await asyncio.gather(*(images.import_archive(self.ctr, n.containerd_socket, archive)
                               for n in self.node_layouts))

    async def node_ready(self, name: str | None = None) -> bool:
        """True when the Node (the first one by default) exists and its ``Ready`` condition is True."""
        node = await self.admin.request("GET", f"/api/v1/nodes/{name or self.node.name}")
        conds = node.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    async def restart_kubelet(self, layout: NodeLayout | None = None) -> None:
        """Stop a node's kubelet (the first node's by default; SIGTERM) and start it again with the same
        configuration; waits for Ready."""
        layout = layout or self.node
        old = self._procs.pop(self._proc("kubelet", layout), None)
        if old:
            await old.stop(grace=15.0)
        await self._start_kubelet(layout)

    async def pod_log(self, namespace: str, pod: str, container: str | None = None) -> str:
        """A container's log read through the API server (which fetches it from the kubelet)."""
        assert self._http is not None
        params = {"container": container} if container else {}
        return str(await self._admin_text(f"/api/v1/namespaces/{namespace}/pods/{pod}/log", params))

    async def _admin_text(self, path: str, params: dict[str, str]) -> str:
        session = self.admin._http()
        async with session.get(self.admin.server + path, params=params) as resp:
            text = await resp.text()
            if resp.status >= 300:
                raise RuntimeError(f"GET {path}: HTTP {resp.status}: {text[:300]}")
            return text


def kubelet_log_lines(env: ClusterEnvironment, needles: Sequence[str],
                      layout: NodeLayout | None = None) -> list[str]:
    """The kubelet log's lines (the first node's by default) containing every one of ``needles``."""
    text = env.kubelet_log(layout).read_text(errors="replace")
    return [line for line in text.splitlines() if all(n in line for n in needles)]
