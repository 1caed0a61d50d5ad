"""``draflow``: look at a running draflow from the outside (also installed as the kubectl plugin
``kubectl-draflow``: ``kubectl draflow status``).

    draflow status [-o wide|json|yaml]     devices per node and pool: total, allocated, tainted, unhealthy;
                                           the allocator's pool status (ResourcePoolStatusRequest)
    draflow describe node NODE             the node's slices, pools, devices (taints), claims and their pods
    draflow explain [NAMESPACE/]CLAIM      why a claim is not allocated (the allocator's explanation)
    draflow explain pod/POD | --pod POD    the same for each claim of a pod
    draflow events [--claim [NS/]CLAIM]    a claim's lifecycle timeline, or the latest events
    draflow trace [NAMESPACE/]CLAIM        the claim's span tree from Jaeger, with the Jaeger link
    draflow trace pod/POD                  the same for each claim of a pod
    draflow ui [--port P] [--open]         the allocator's web view on a loopback port, with your token

kubectl's flags, before or after the subcommand: --kubeconfig (env KUBECONFIG), --context,
-n/--namespace (names without a namespace; default: the context's namespace, else default),
-A/--all-namespaces (accepted; status and describe are cluster-wide),
-o table|wide|json|yaml (status, describe, explain).
Others: --nats-url NATS_URL, --jaeger-url JAEGER_URL, --allocator-url DRAFLOW_ALLOCATOR_URL (default:
the allocator pod through the API server's proxy), status --pool-status-wait DRAFLOW_POOL_STATUS_WAIT.
``source <state>/env.sh`` of ``make up`` sets the environment.
--token DRAFLOW_TOKEN: ``explain`` and ``ui`` send a bearer token to the allocator (its /explain and /ui
need one unless it listens on loopback only), else the kubeconfig's; the user needs ClusterRole
draflow-debug-reader.
NATS credentials and TLS: --nats-creds NATS_CREDS, --nats-user NATS_USER, --nats-password NATS_PASSWORD,
--nats-ca NATS_CA, --nats-cert NATS_CERT, --nats-key NATS_KEY.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable

from draflow_runtime.busauth import NatsSecurity
from draflow_runtime.kube import KubeClient

from . import describe, events, explain, status, trace, ui
from .kubeopts import common_flags, finish, namespace_of


def _ref(value: str) -> tuple[str | None, str]:
    """``NAMESPACE/NAME`` or ``NAME`` (namespace from -n / the context)."""
    namespace, sep, name = value.rpartition("/")
    if (sep and not namespace) or not name or "/" in namespace:
        raise argparse.ArgumentTypeError(f"expected [<namespace>/]<name>, got {value!r}")
    return (namespace or None), name


class _Parser(argparse.ArgumentParser):
    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, rest = super().parse_known_args(args, namespace)
        return finish(parsed), rest


def parser(prog: str = "draflow") -> argparse.ArgumentParser:
    doc = (__doc__ or "").splitlines()
    common = common_flags()
    p = _Parser(
        prog=prog, description=" ".join(doc[:2]), epilog="\n".join(doc[3:]), parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    env = os.environ.get
    # subparsers are plain parsers: only the top level fills defaults (see kubeopts)
    sub = p.add_subparsers(dest="command", required=True, parser_class=argparse.ArgumentParser)
    st = sub.add_parser("status", parents=[common], help="devices per node and pool: total, allocated, "
                        "tainted, unhealthy, free; then the structured-allocator's pool status")
    st.add_argument("--pool-status-wait", type=float, default=float(env("DRAFLOW_POOL_STATUS_WAIT", "5")),
                    help="seconds to wait for the allocator's ResourcePoolStatusRequest answers (env "
                    "DRAFLOW_POOL_STATUS_WAIT; default %(default)s; negative: skip them)")
    de = sub.add_parser("describe", parents=[common], help="the DRA view of a node")
    de.add_argument("kind", choices=["node", "nodes", "no"], metavar="node")
    de.add_argument("name", metavar="NODE")
    ex = sub.add_parser("explain", parents=[common], help="why a claim (or each claim of a pod) is (not) "
                        "allocated")
    ex.add_argument("target", nargs="?", metavar="[NAMESPACE/]CLAIM | pod/POD")
    ex.add_argument("--pod", help="explain each claim of this pod")
    ev = sub.add_parser("events", parents=[common], help="a claim's lifecycle timeline, or the latest events")
    ev.add_argument("--claim", type=_ref, metavar="[NAMESPACE/]CLAIM", help="only this claim")
    ev.add_argument("--last", type=int, default=0, help="at most this many (default: all / 100)")
    tr = sub.add_parser("trace", parents=[common], help="the claim's span tree from Jaeger")
    tr.add_argument("claim", type=_claim_or_pod, metavar="[NAMESPACE/]CLAIM | pod/POD")
    tr.add_argument("--wait", type=float, default=0.0, help="seconds to wait for spans to reach Jaeger")
    wv = sub.add_parser("ui", parents=[common], help="the allocator's web view (/ui) on a loopback port, "
                        "forwarded with your token")
    wv.add_argument("--port", type=int, default=0, help="local port (default: a free one)")
    wv.add_argument("--open", action="store_true", help="open it in the default browser")
    return p


class PodRef(tuple[str | None, str]):
    """``pod/[NAMESPACE/]POD`` of ``draflow trace``: (namespace or None, pod)."""


def _claim_or_pod(value: str) -> tuple[str | None, str]:
    """``[NAMESPACE/]CLAIM`` as :func:`_ref`, or ``pod/[NAMESPACE/]POD`` as a :class:`PodRef`."""
    kind, sep, rest = value.partition("/")
    if sep and kind in ("pod", "pods", "po"):
        return PodRef(_ref(rest))
    return _ref(value)


def explain_target(args: argparse.Namespace) -> tuple[str, str, str]:
    """(``claim`` or ``pod``, namespace, name) of ``draflow explain``."""
    if bool(args.pod) == bool(args.target):
        raise ValueError("give one of [NAMESPACE/]CLAIM, pod/POD or --pod POD")
    if args.pod:
        namespace, name = _ref(args.pod)
        return "pod", namespace or namespace_of(args), name
    kind, sep, rest = args.target.partition("/")
    if sep and kind in ("pod", "pods", "po"):
        namespace, name = _ref(rest)
        return "pod", namespace or namespace_of(args), name
    if sep and kind in ("resourceclaim", "resourceclaims"):
        namespace, name = _ref(rest)
        return "claim", namespace or namespace_of(args), name
    namespace, name = _ref(args.target)
    return "claim", namespace or namespace_of(args), name


async def _forever(served: Awaitable[None]) -> str:
    await served
    return ""


async def _with_kube(args: argparse.Namespace, fn: Callable[[KubeClient], Awaitable[str]]) -> str:
    kube = await KubeClient.from_kubeconfig(args.kubeconfig, context=args.context)
    try:
        return await fn(kube)
    finally:
        await kube.close()


async def run(args: argparse.Namespace) -> str:
    if args.command == "status":
        return await _with_kube(args, lambda k: status.run(k, args.pool_status_wait, args.output))
    if args.command == "describe":
        return await _with_kube(args, lambda k: describe.node(k, args.name, args.output))
    if args.command == "explain":
        kind, namespace, name = explain_target(args)
        return await _with_kube(args, lambda k: explain.run_target(
            k, args.allocator_url, kind, namespace, name, output=args.output, token=args.token))
    if args.command == "ui":
        await _with_kube(args, lambda k: _forever(ui.run(k, args.allocator_url, args.token, port=args.port,
                                                         open_browser=args.open)))
        return ""
    if args.command == "trace":
        kind = "pod" if isinstance(args.claim, PodRef) else "claim"
        namespace = args.claim[0] or namespace_of(args)
        return await _with_kube(args, lambda k: trace.run_target(k, args.jaeger_url, kind, namespace,
                                                                 args.claim[1], wait=args.wait))
    claim = None if args.claim is None else (args.claim[0] or namespace_of(args), args.claim[1])
    security = NatsSecurity(
        creds_file=args.nats_creds, user=args.nats_user, password=args.nats_password,
        tls_ca_file=args.nats_ca, tls_cert_file=args.nats_cert, tls_key_file=args.nats_key)
    return await events.run(args.nats_url, claim, args.last, security)


class QuietTlsClose(logging.Filter):
    """Drops asyncio's note that nats-py's protocol returned True from ``eof_received`` on a TLS
    connection (``returning true from eof_received() has no effect when using ssl``): harmless (the
    connection closes either way), but without a logging set-up a CLI prints it on stderr after every
    ``draflow events`` against a TLS nats-server."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "eof_received() has no effect when using ssl" not in record.getMessage()


def main(argv: list[str] | None = None) -> int:
    logging.getLogger("asyncio").addFilter(QuietTlsClose())
    prog = os.path.basename(sys.argv[0]) if argv is None else "draflow"
    args = parser("kubectl draflow" if prog == "kubectl-draflow" else "draflow").parse_args(argv)
    try:
        out = asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130
    except LookupError as exc:  # what was asked for is not there: kubectl's NotFound, exit 1
        print(f"draflow {args.command}: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a CLI: one line, no traceback
        print(f"draflow {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    try:
        print(out, flush=True)
    except BrokenPipeError:  # `draflow ... | head`: the reader left; exit as a SIGPIPE'd tool, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush cannot fail
        return 128 + signal.SIGPIPE
    return 0


if __name__ == "__main__":
    sys.exit(main())
