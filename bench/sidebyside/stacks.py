"""The two stacks under test, started as subprocesses of a fresh draflow-testenv ``Environment``.

``upstream`` / ``upstream+pqh``: kube-controller-manager v1.37.1 running what scheduler_perf runs next to
its scheduler (``resourceclaim-controller`` and ``garbage-collector``; the namespace controller has nothing
to do here) and kube-scheduler v1.37.1 with its default configuration, both with client QPS/burst 5000 as
scheduler_perf sets them; default feature gates, or ``SchedulerPreQueueingHints=true`` (alpha in 1.37) for
the scheduler. ``draflow``: claim-controller + structured-allocator exactly as ``make up`` starts them
(``draflow_testenv.flow.service_commands``: NATS with TLS and a user per service, traces to Jaeger,
feature gates as the API server's), plus an HTTP port each for ``/readyz``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from draflow_testenv.environment import Environment
from draflow_testenv.flow import service_commands
from draflow_testenv.natssecure import USERS, env_prefix
from draflow_testenv.process import ManagedProcess
from draflow_testenv.servers import HOST, free_port
from draflow_testenv.statefile import PIDS_FILE
from draflow_testenv.upstream import start_control_plane, wait_healthy

STACKS = ("draflow", "upstream", "upstream+pqh")
KCM_CONTROLLERS = ("resourceclaim-controller", "garbage-collector-controller")


@dataclass
class Stack:
    name: str
    scheduler_name: str  # spec.schedulerName of the pods it schedules
    processes: dict[str, ManagedProcess]  # component name -> process


async def start_upstream(env: Environment, pqh: bool) -> Stack:
    plane = await start_control_plane(
        env, env.run_service, controllers=KCM_CONTROLLERS, feature_gates=False, verbosity=1,
        scheduler_args=["--feature-gates=SchedulerPreQueueingHints=true"] if pqh else [])
    return Stack("upstream+pqh" if pqh else "upstream", "default-scheduler", plane.processes)


async def start_draflow(env: Environment) -> Stack:
    allocator_port, controller_port = free_port(), free_port()
    wanted = {"claim-controller", "structured-allocator"}
    procs: dict[str, ManagedProcess] = {}
    secure = env.secure_nats
    for name, argv in service_commands(env, 0, 0, allocator_port):
        if name not in wanted:
            continue
        if name == "claim-controller":  # make up runs it without an HTTP server; /readyz is needed here
            argv = [a if a != "0" or argv[i - 1] != "--http-port" else str(controller_port)
                    for i, a in enumerate(argv)]
            argv += ["--http-host", HOST]
        extra = secure.service_env(env_prefix(name), name) if secure is not None and name in USERS else None
        procs[name] = await env.run_service(argv, name=name, env=extra)
    await wait_healthy(f"http://{HOST}:{allocator_port}/readyz", procs["structured-allocator"])
    await wait_healthy(f"http://{HOST}:{controller_port}/readyz", procs["claim-controller"])
    return Stack("draflow", "draflow", procs)


async def start(env: Environment, name: str) -> Stack:
    if name == "draflow":
        return await start_draflow(env)
    if name in ("upstream", "upstream+pqh"):
        return await start_upstream(env, pqh=name == "upstream+pqh")
    raise ValueError(f"unknown stack {name!r}; one of {', '.join(STACKS)}")


def server_pids(env: Environment) -> dict[str, int]:
    """kube-apiserver, etcd, nats-server, jaeger: from the environment's ``pids.json``."""
    doc = json.loads((env.state_dir / PIDS_FILE).read_text())
    procs = doc.get("processes") or {}
    return {name: int(pid) for name, pid in procs.items()}
