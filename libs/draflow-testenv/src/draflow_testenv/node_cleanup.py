"""Leave nothing of a real node behind: containers, shims, mounts, cgroups, the CNI bridge, the node's
address (and create the node's cgroup parent and address before its kubelet starts).

containerd's runc shims run in sessions of their own (they outlive containerd by design), the kubelet
bind-mounts its root dir onto itself and mounts pod volumes under it, containerd mounts container root
filesystems and network namespaces under its state dir, the kubelet creates cgroups under its cgroup parent
in every hierarchy and the CNI bridge plugin creates a Linux bridge. ``clean_node`` removes all of them,
each step best-effort so one failure does not keep the rest in place; it reports what it could not remove.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

from draflow_testenv.images import run
from draflow_testenv.node import NodeLayout
from draflow_testenv.process import pid_alive

log = logging.getLogger(__name__)
CGROUP_ROOT = Path("/sys/fs/cgroup")


async def remove_containers(ctr: Path, socket: Path) -> None:
    """Kill and delete every task and container of containerd's ``k8s.io`` namespace (best-effort)."""
    base: list[str | Path] = [ctr, "--address", socket, "--namespace", "k8s.io"]
    with contextlib.suppress(Exception):
        out = await run([*base, "tasks", "ls", "--quiet"])
        for task in out.split():
            with contextlib.suppress(Exception):
                await run([*base, "tasks", "kill", "--all", "--signal", "SIGKILL", task])
            with contextlib.suppress(Exception):
                await run([*base, "tasks", "delete", "--force", task])
    with contextlib.suppress(Exception):
        out = await run([*base, "containers", "ls", "--quiet"])
        for container in out.split():
            with contextlib.suppress(Exception):
                await run([*base, "containers", "delete", container])


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    procs: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        procs[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    return procs


def node_processes(layout: NodeLayout) -> list[int]:
    """Processes whose command line names the node's directory (shims, stray servers), with descendants."""
    procs = _processes()
    me = os.getpid()
    inside = str(layout.dir) + "/"  # not a sibling node's dir whose name starts with this one's
    roots = {pid for pid, (_, cmd) in procs.items() if inside in cmd and pid != me}
    found, frontier = set(roots), set(roots)
    while frontier:
        frontier = {pid for pid, (ppid, _) in procs.items() if ppid in frontier and pid not in found}
        found |= frontier
    return sorted(found)


def kill_node_processes(layout: NodeLayout, timeout: float = 10.0) -> list[int]:
    pids = node_processes(layout)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if pid_alive(p)]


def _unescape(path: str) -> str:
    return path.encode().decode("unicode_escape") if "\\" in path else path


def mounts_under(path: Path) -> list[str]:
    """Mount points at or under ``path`` (from /proc/self/mountinfo), deepest first."""
    base = str(path)
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if point == base or point.startswith(base + "/"):
            points.append(point)
    return sorted(set(points), key=lambda p: (-p.count("/"), p))


def unmount_under(path: Path, *, include_self: bool = True) -> list[str]:
    """Lazily unmount everything mounted under ``path`` (and ``path`` itself); returns what stays mounted."""
    for _ in range(5):  # a bind mount stacked on itself shows once per layer
        points = [p for p in mounts_under(path) if include_self or p != str(path)]
        if not points:
            return []
        for point in points:
            subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
    return [p for p in mounts_under(path) if include_self or p != str(path)]


def hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies: ``/sys/fs/cgroup`` itself under cgroup v2 (unified), else each v1
    hierarchy under it (and a hybrid layout's ``unified``)."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT]
    if not CGROUP_ROOT.is_dir():
        return []
    return [h for h in sorted(CGROUP_ROOT.iterdir()) if (h / "cgroup.procs").exists()]


def create_cgroups(cgroup_root: str) -> None:
    """Create the node's cgroup parent in every hierarchy (the kubelet requires it to exist); a new v1
    cpuset cgroup gets its parent's CPUs and memory nodes (v1 leaves them empty)."""
    for hierarchy in hierarchies():
        top = hierarchy / cgroup_root.lstrip("/")
        top.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (top / name).exists() and not (top / name).read_text().strip():
                (top / name).write_text((hierarchy / name).read_text())


def remove_cgroups(cgroup_root: str) -> list[str]:
    """rmdir the node's cgroup parent, children first, in every hierarchy; returns what is left."""
    left = []
    for hierarchy in hierarchies():
        top = hierarchy / cgroup_root.lstrip("/")
        if not top.is_dir():
            continue
        dirs = [Path(d) for d, _, _ in os.walk(top)]
        for d in sorted(dirs, key=lambda p: -len(p.parts)):
            try:
                d.rmdir()
            except OSError:
                left.append(str(d))
    return left


def add_node_address(layout: NodeLayout) -> None:
    """The node's address (``/32``) on the loopback interface: local to this machine, yet not a loopback
    address (the kubelet refuses those). This VM kind's kernel has no dummy interfaces."""
    remove_node_address(layout)
    argv = ["ip", "addr", "add", f"{layout.node_ip}/32", "dev", "lo"]
    subprocess.run(argv, capture_output=True, check=True)


def remove_node_address(layout: NodeLayout) -> None:
    argv = ["ip", "addr", "del", f"{layout.node_ip}/32", "dev", "lo"]
    subprocess.run(argv, capture_output=True, check=False)


def delete_interface(name: str) -> None:
    if Path("/sys/class/net", name).exists():
        subprocess.run(["ip", "link", "delete", name], capture_output=True, check=False)


CONTAINER_LOG_LINKS = Path("/var/log/containers")  # the kubelet's fixed directory of log symlinks
CNI_RESULTS = Path("/var/lib/cni/results")  # libcni's fixed cache of ADD results


def host_files(layout: NodeLayout) -> list[Path]:
    """The node's files in fixed host directories: the kubelet's container log symlinks into the node dir
    and libcni's cached results of the node's network (``draflow-<id>-<sandbox>-eth0``, the sandbox's
    ``cni-loopback-<sandbox>-lo``)."""
    found = []
    with contextlib.suppress(OSError):
        for link in CONTAINER_LOG_LINKS.iterdir():
            if link.is_symlink() and os.readlink(link).startswith(str(layout.dir) + "/"):
                found.append(link)
    prefix = f"draflow-{layout.node_id}-"
    with contextlib.suppress(OSError):
        results = list(CNI_RESULTS.iterdir())
        sandboxes = {r.name[len(prefix):].rsplit("-", 1)[0] for r in results if r.name.startswith(prefix)}
        found += [r for r in results if r.name.startswith(prefix)
                  or (r.name.startswith("cni-loopback-") and r.name[13:].rsplit("-", 1)[0] in sandboxes)]
    return found


def leftovers(layout: NodeLayout) -> list[str]:
    """What of the node is still there: processes, mounts, cgroups, the bridge, the node address."""
    left = [f"process {p}" for p in node_processes(layout) if pid_alive(p)]
    left += [f"mount {m}" for m in mounts_under(layout.dir)]
    left += [f"cgroup {h}{layout.cgroup_root}" for h in hierarchies()
             if (h / layout.cgroup_root.lstrip("/")).is_dir()]
    if Path("/sys/class/net", layout.bridge).exists():
        left.append(f"interface {layout.bridge}")
    addrs = subprocess.run(["ip", "-o", "addr", "show", "dev", "lo"], capture_output=True, text=True).stdout
    if f" {layout.node_ip}/" in addrs:
        left.append(f"address {layout.node_ip}")
    return left + [f"file {f}" for f in host_files(layout)]


def clean_node(layout: NodeLayout) -> list[str]:
    """Kill the node's remaining processes, unmount, remove cgroups and the bridge; returns leftovers."""
    left = [f"process {p}" for p in kill_node_processes(layout)]
    left += [f"mount {m}" for m in unmount_under(layout.dir)]
    left += [f"cgroup {c}" for c in remove_cgroups(layout.cgroup_root)]
    delete_interface(layout.bridge)
    if Path("/sys/class/net", layout.bridge).exists():
        left.append(f"interface {layout.bridge}")
    remove_node_address(layout)
    for f in host_files(layout):
        with contextlib.suppress(OSError):
            f.unlink()
    if left:
        log.warning("node clean-up left things behind", extra={"node": layout.name, "left": left})
    return left
