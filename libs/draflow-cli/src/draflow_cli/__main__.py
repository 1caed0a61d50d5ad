"""``draflow``: look at a running draflow from the outside.

    draflow status                         devices per node and pool: total, allocated, tainted, unhealthy;
                                           the allocator's pool status (ResourcePoolStatusRequest)
    draflow explain <namespace>/<claim>    why a claim is not allocated (the allocator's explanation)
    draflow events [--claim ns/name]       a claim's lifecycle timeline, or the latest events
    draflow trace <namespace>/<claim>      the claim's span tree from Jaeger, with the Jaeger link

Every flag has an environment twin: --kubeconfig KUBECONFIG, --nats-url NATS_URL, --jaeger-url JAEGER_URL,
--allocator-url DRAFLOW_ALLOCATOR_URL (``source <state>/env.sh`` of ``make up`` sets them),
--token DRAFLOW_TOKEN, status --pool-status-wait DRAFLOW_POOL_STATUS_WAIT; NATS credentials and TLS:
--nats-creds NATS_CREDS, --nats-user NATS_USER, --nats-password NATS_PASSWORD, --nats-ca NATS_CA,
--nats-cert NATS_CERT, --nats-key NATS_KEY.
``explain`` sends a bearer token to the allocator (its /explain needs one unless it listens on loopback
only): --token, else the kubeconfig's token; the user needs ClusterRole draflow-debug-reader.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable

from draflow_runtime.busauth import NatsSecurity
from draflow_runtime.kube import KubeClient

from . import events, explain, status, trace


def _claim_ref(value: str) -> tuple[str, str]:
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name:
        raise argparse.ArgumentTypeError(f"expected <namespace>/<claim>, got {value!r}")
    return namespace, name


def parser() -> argparse.ArgumentParser:
    doc = (__doc__ or "").splitlines()
    p = argparse.ArgumentParser(
        prog="draflow", description=doc[0], epilog="\n".join(doc[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    env = os.environ.get
    p.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="kubeconfig file (env KUBECONFIG)")
    p.add_argument("--nats-url", default=env("NATS_URL", "nats://127.0.0.1:4222"),
                   help="NATS server URL (env NATS_URL; default %(default)s)")
    p.add_argument("--jaeger-url", default=env("JAEGER_URL", "http://127.0.0.1:16686"),
                   help="Jaeger query URL (env JAEGER_URL; default %(default)s)")
    p.add_argument("--allocator-url", default=env("DRAFLOW_ALLOCATOR_URL", "http://127.0.0.1:8080"),
                   help="structured-allocator HTTP server (env DRAFLOW_ALLOCATOR_URL; default %(default)s)")
    p.add_argument("--nats-creds", default=env("NATS_CREDS"), help="NATS credentials file (env NATS_CREDS)")
    p.add_argument("--nats-user", default=env("NATS_USER"), help="NATS user (env NATS_USER)")
    p.add_argument("--nats-password", default=env("NATS_PASSWORD"),
                   help="NATS password (env NATS_PASSWORD; better there than on the command line)")
    p.add_argument("--nats-ca", default=env("NATS_CA"), help="CA of the NATS server's certificate; turns TLS "
                   "on (env NATS_CA)")
    p.add_argument("--nats-cert", default=env("NATS_CERT"),
                   help="client certificate for NATS (env NATS_CERT)")
    p.add_argument("--nats-key", default=env("NATS_KEY"), help="its private key (env NATS_KEY)")
    p.add_argument("--token", default=env("DRAFLOW_TOKEN") or None,
                   help="bearer token for the allocator's /explain (env DRAFLOW_TOKEN; default: the "
                   "kubeconfig's token, if it has one)")
    sub = p.add_subparsers(dest="command", required=True)
    st = sub.add_parser("status", help="devices per node and pool: total, allocated, tainted, unhealthy, "
                        "free; then the structured-allocator's pool status")
    st.add_argument("--pool-status-wait", type=float, default=float(env("DRAFLOW_POOL_STATUS_WAIT", "5")),
                    help="seconds to wait for the allocator's ResourcePoolStatusRequest answers (env "
                    "DRAFLOW_POOL_STATUS_WAIT; default %(default)s; negative: skip them)")
    ex = sub.add_parser("explain", help="why a claim is (not) allocated")
    ex.add_argument("claim", type=_claim_ref, metavar="NAMESPACE/CLAIM")
    ev = sub.add_parser("events", help="a claim's lifecycle timeline, or the latest events")
    ev.add_argument("--claim", type=_claim_ref, metavar="NAMESPACE/CLAIM", help="only this claim")
    ev.add_argument("--last", type=int, default=0, help="at most this many (default: all / 100)")
    tr = sub.add_parser("trace", help="the claim's span tree from Jaeger")
    tr.add_argument("claim", type=_claim_ref, metavar="NAMESPACE/CLAIM")
    tr.add_argument("--wait", type=float, default=0.0, help="seconds to wait for spans to reach Jaeger")
    return p


async def _with_kube(args: argparse.Namespace, fn: Callable[[KubeClient], Awaitable[str]]) -> str:
    kube = await KubeClient.from_kubeconfig(args.kubeconfig)
    try:
        return await fn(kube)
    finally:
        await kube.close()


async def run(args: argparse.Namespace) -> str:
    if args.command == "status":
        return await _with_kube(args, lambda k: status.run(k, args.pool_status_wait))
    if args.command == "explain":
        return await _with_kube(args, lambda k: explain.run(k, args.allocator_url, *args.claim,
                                                                token=args.token))
    if args.command == "trace":
        return await _with_kube(args, lambda k: trace.run(k, args.jaeger_url, *args.claim, wait=args.wait))
    security = NatsSecurity(
        creds_file=args.nats_creds, user=args.nats_user, password=args.nats_password,
        tls_ca_file=args.nats_ca, tls_cert_file=args.nats_cert, tls_key_file=args.nats_key)
    return await events.run(args.nats_url, args.claim, args.last, security)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        out = asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a CLI: one line, no traceback
        print(f"draflow {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
