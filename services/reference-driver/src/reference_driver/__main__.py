"""``reference-driver``: serve fake GPUs to a kubelet (or kubelet-dra-shim) on one node or a fleet.

    reference-driver --node-name node-1 --registry-dir /tmp/kl/plugins_registry --plugins-dir /tmp/kl/plugins
    reference-driver --node-count 200 --node-name-prefix sim- --fleet-root /tmp/fleet

Every flag has an environment twin (``DRAFLOW_REFERENCE_DRIVER_<FLAG>``); ``--help`` lists them.
"""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Sequence

from draflow_runtime.kube import KubeClient
from draflow_runtime.log import configure_logging, get_logger
from draflow_runtime.observability import ObservabilityServer
from draflow_runtime.service import run
from draflow_runtime.settings import load_settings
from draflow_runtime.tracing import setup_tracing, shutdown_tracing
from reference_driver.fleet import Fleet
from reference_driver.settings import DriverSettings

SERVICE = "reference-driver"
log = get_logger(__name__)


def _raise_fd_limit(sockets: int) -> None:
    """Each node needs two listening sockets plus connections; lift the soft fd limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < sockets * 4 + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(settings: DriverSettings) -> None:
    """Run until cancelled: every node's gRPC server, the poller and /metrics, /healthz, /readyz."""
    kube = await KubeClient.from_kubeconfig(settings.kubeconfig)
    fleet = Fleet(settings, kube)
    _raise_fd_limit(len(fleet.nodes))
    http = None
    if settings.http_port:
        http = ObservabilityServer(settings.http_port, settings.http_host, ready=lambda: fleet.serving)
        await http.start()
    try:
        await fleet.start()
        await asyncio.Event().wait()
    finally:
        await fleet.stop()
        if http is not None:
            await http.stop()
        await kube.close()
        shutdown_tracing()


def main(argv: Sequence[str] | None = None) -> None:
    settings = load_settings(DriverSettings, argv, prog=SERVICE)
    configure_logging(SERVICE, settings.log_level, settings.log_format)
    setup_tracing(SERVICE)
    run(lambda: serve(settings))


if __name__ == "__main__":
    main()
