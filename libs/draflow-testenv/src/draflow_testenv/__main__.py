"""``draflow-testenv``: run the real local environment in the foreground, or stop one.

    draflow-testenv up [--state-dir DIR] [--nodes N] [--gpus G] [--env-only]
                                                       # start; print addresses; Ctrl-C / SIGTERM stops
    draflow-testenv up --real-node [--real-nodes N] [--state-dir DIR] [--env-only]
                                                       # a real cluster (kubelet, containerd; root) of N nodes
                                                       # with draflow installed from overlays/e2e (with
                                                       # --env-only: its kustomizations only written)
    draflow-testenv import-image --state-dir DIR --ref REF
                                                       # the draflow image into every node of that running
                                                       # real cluster, as REF (Tilt's custom_build)
    draflow-testenv down [--state-dir DIR]             # stop a running `up` (recorded PIDs), remove state
    draflow-testenv demo [--state-dir DIR] [--timeout S]
                                                       # apply deploy/demo to a running `up` (with services
                                                       # started elsewhere, e.g. by Tilt); exit 0 once every
                                                       # pod of it is Running

``up`` runs ``STEPS`` in order after the servers are ready and unwinds them in reverse on shutdown:
unless ``--env-only``, the steps of :mod:`draflow_testenv.flow` (the five services, then the demo), or with
``--real-node`` (a ``ClusterEnvironment``) draflow installed from ``deploy/kustomize/overlays/e2e``, or
with ``--env-only`` the kustomizations written for someone else to apply (``<state>/kustomize``, and
``<state>/kustomize-tilt`` for the Tiltfile's ``--real-node`` mode).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path

from draflow_testenv.environment import Environment
from draflow_testenv.process import pid_alive
from draflow_testenv.statefile import default_state_dir, stop_recorded

# A step: given the running environment and the parsed arguments, an async context manager that starts
# something on enter and stops it on exit.
Step = Callable[[Environment, argparse.Namespace], AbstractAsyncContextManager[object]]
STEPS: list[tuple[str, Step]] = []


def _print(msg: str) -> None:
    print(msg, flush=True)


def _nodes(env: Environment) -> str:
    from draflow_testenv.cluster import ClusterEnvironment

    if isinstance(env, ClusterEnvironment):
        return ", ".join(f"{n.name} (real, {n.dir})" for n in env.node_layouts)
    return str(env.nodes)


def _summary(env: Environment, args: argparse.Namespace | None = None) -> str:
    allocator = getattr(args, "allocator_url", "")  # set by the services step (not with --env-only)
    web = [("web view", f"{allocator}/ui  (devices, claims, timelines; live)")] if allocator else []
    rows = [
        *web,
        ("kubeconfig", str(env.kubeconfig)),
        ("API server", env.apiserver_url),
        ("NATS", env.nats_url),
        ("Jaeger query (UI/API)", env.jaeger_query_url),
        ("OTLP gRPC", f"http://{env.otlp_grpc_endpoint}"),
        ("OTLP HTTP", env.otlp_http_endpoint),
        ("env file", f"source {env.env_file}"),
        ("logs", str(env.logs_dir)),
        ("nodes", _nodes(env)),
        ("feature gates", ",".join(env.feature_gates)),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


@contextlib.asynccontextmanager
async def _installed(env: Environment) -> AsyncIterator[object]:
    from draflow_testenv import deploy_e2e
    from draflow_testenv.cluster import ClusterEnvironment
    from draflow_testenv.wait import eventually

    assert isinstance(env, ClusterEnvironment)
    objects = await deploy_e2e.install(env)
    await eventually(lambda: deploy_e2e.workloads_ready(env), timeout=300, interval=1.0,
                     what="draflow's workloads Ready")
    _print(f"draflow-testenv: draflow installed ({len(objects)} objects), node {env.node.name} Ready")
    yield objects


def _install_draflow(env: Environment, args: argparse.Namespace) -> AbstractAsyncContextManager[object]:
    return _installed(env)


@contextlib.asynccontextmanager
async def _written(env: Environment) -> AsyncIterator[object]:
    from draflow_testenv import deploy_e2e
    from draflow_testenv.cluster import ClusterEnvironment

    assert isinstance(env, ClusterEnvironment)
    plain = await asyncio.to_thread(deploy_e2e.write_kustomization, env)
    tilt = await asyncio.to_thread(deploy_e2e.write_tilt_kustomization, env)
    _print(f"draflow-testenv: kubectl apply --server-side -k {plain}  (or Tilt: {tilt})")
    yield None


def _write_kustomizations(env: Environment, args: argparse.Namespace) -> AbstractAsyncContextManager[object]:
    return _written(env)


async def _import_image(args: argparse.Namespace) -> int:
    from draflow_testenv import deploy_e2e

    sockets = await deploy_e2e.import_into_running(_state_dir(args), args.ref)
    _print(f"draflow-testenv: {args.ref} loaded into {len(sockets)} node(s)")
    return 0


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir or default_state_dir()).resolve()


async def _up(args: argparse.Namespace, state: Path) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    env: Environment
    if args.real_node:
        from draflow_testenv.cluster import ClusterEnvironment

        names = [f"draflow-node-{i}" for i in range(1, args.real_nodes + 1)]
        env = ClusterEnvironment(state, node_names=names)
    else:
        env = Environment(state, nodes=args.nodes, secure_nats=args.nats_auth)
    async with AsyncExitStack() as stack:
        _print(f"draflow-testenv: starting in {state} (logs in {env.logs_dir}) ...")
        if not await _until_stopped(stop, env.start()):
            _print("draflow-testenv: interrupted during start-up")
            return 130
        stack.push_async_callback(_stop_env, env)
        for name, step in STEPS:
            _print(f"draflow-testenv: {name} ...")
            if not await _until_stopped(stop, stack.enter_async_context(step(env, args))):
                return 130
        _print(f"draflow-testenv: up in {env.startup_seconds:.1f}s\n{_summary(env, args)}\n"
               "Ctrl-C (or `draflow-testenv down`) stops everything.")
        await stop.wait()
    return 0


async def _stop_env(env: Environment) -> None:
    _print("draflow-testenv: stopping ...")
    await env.stop()
    _print(f"draflow-testenv: stopped (logs kept in {env.logs_dir})")


async def _until_stopped(stop: asyncio.Event, coro: Awaitable[object]) -> bool:
    """Run ``coro`` unless ``stop`` is set first (then cancel it). True if it completed."""
    task = asyncio.ensure_future(coro)
    waiter = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


def _owner_alive(state: Path) -> bool:
    try:
        owner = int(json.loads((state / "pids.json").read_text()).get("owner", 0))
    except (OSError, ValueError):
        return False
    return bool(owner) and pid_alive(owner)


def _down(args: argparse.Namespace) -> int:
    state = _state_dir(args)
    alive = stop_recorded(state)
    shutil.rmtree(state, ignore_errors=True)
    _print(f"draflow-testenv: stopped {len(alive)} process(es), removed {state}")
    return 0


def read_env_file(path: Path) -> dict[str, str]:
    """The ``export K=V`` lines of an ``env.sh`` written by ``Environment.write_env_file``."""
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line.removeprefix("export ").partition("=")
            out[key] = value
    return out


async def _demo(args: argparse.Namespace) -> int:
    from draflow_runtime.kube import KubeClient
    from draflow_testenv import flow
    from draflow_testenv.natssecure import nats_env_security

    env_file = _state_dir(args) / "env.sh"
    if not env_file.is_file():
        _print(f"{env_file} not found: is `draflow-testenv up --state-dir {_state_dir(args)}` running?")
        return 1
    values = read_env_file(env_file)
    async with await KubeClient.from_kubeconfig(values["KUBECONFIG"]) as kube:
        running, expected = await flow.run_demo(kube, values["NATS_URL"], args.timeout,
                                                security=nats_env_security(values))
    return 0 if running >= expected else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="draflow-testenv", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the environment and stay up until Ctrl-C / SIGTERM")
    up.add_argument("--state-dir", help="state directory (default: <repo>/.draflow)")
    up.add_argument("--nodes", type=int, default=4, help="number of simulated nodes (used by later steps)")
    up.add_argument("--gpus", type=int, default=8, help="fake GPUs per simulated node")
    up.add_argument("--env-only", action="store_true", help="only the servers: no services, no demo")
    up.add_argument("--nats-auth", action=argparse.BooleanOptionalAction, default=True,
                    help="nats-server demands TLS (client certificates) and a password per service, with "
                    "the permissions of deploy/kustomize/components/nats-auth (default: on)")
    up.add_argument("--real-node", action="store_true",
                    help="a real cluster: controller-manager, scheduler, containerd and a kubelet (root), "
                         "draflow installed from deploy/kustomize/overlays/e2e")
    up.add_argument("--real-nodes", type=int, default=1,
                    help="with --real-node: how many real nodes (a kubelet and a containerd each)")
    down = sub.add_parser("down", help="stop a running `up` and remove its state")
    down.add_argument("--state-dir", help="state directory (default: <repo>/.draflow)")
    demo = sub.add_parser("demo", help="apply the demo workload to a running `up`, wait until it runs")
    demo.add_argument("--state-dir", help="state directory (default: <repo>/.draflow)")
    demo.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the pods")
    image = sub.add_parser("import-image", help="build the draflow image and load it into every node of a "
                                                "running `up --real-node`")
    image.add_argument("--state-dir", help="state directory (default: <repo>/.draflow)")
    image.add_argument("--ref", required=True, help="the image reference to give it (Tilt: $EXPECTED_REF)")
    args = parser.parse_args(argv)
    if args.command == "down":
        return _down(args)
    if args.command == "import-image":
        return asyncio.run(_import_image(args))
    if args.command == "demo":
        return asyncio.run(_demo(args))
    state = _state_dir(args)
    if _owner_alive(state):
        _print(f"an environment is already running from {state}; run `draflow-testenv down` first")
        return 1
    shutil.rmtree(state, ignore_errors=True)  # every `up` starts from a fresh cluster
    if args.real_node and not args.env_only:
        STEPS.append(("install draflow from deploy/kustomize/overlays/e2e", _install_draflow))
    elif args.real_node:
        STEPS.append(("write draflow's kustomizations (not applied)", _write_kustomizations))
    elif not args.env_only:
        from draflow_testenv import flow

        STEPS.extend(step for step in flow.STEPS if step not in STEPS)
    return asyncio.run(_up(args, state))


if __name__ == "__main__":
    sys.exit(main())
