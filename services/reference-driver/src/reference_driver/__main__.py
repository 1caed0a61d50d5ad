"""``reference-driver``: serve fake GPUs to a kubelet (or kubelet-dra-shim) on one node or a fleet.

    reference-driver --node-name node-1 --registry-dir /tmp/kl/plugins_registry --plugins-dir /tmp/kl/plugins
    reference-driver --node-count 200 --node-name-prefix sim- --fleet-root /tmp/fleet

Every flag has an environment twin (``DRAFLOW_REFERENCE_DRIVER_<FLAG>``); ``--help`` lists them.
"""

from __future__ import annotations

import resource
from collections.abc import Sequence

from draflow_runtime.log import get_logger
from draflow_runtime.service import run_service
from draflow_runtime.servicecontext import ServiceContext
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
    async with ServiceContext(SERVICE, settings) as svc:
        fleet = Fleet(settings, svc.kube)
        _raise_fd_limit(len(fleet.nodes))
        await svc.serve_http(ready=lambda: fleet.serving)
        svc.on_close(fleet.stop, "fleet")
        await fleet.start()
        await svc.wait_forever()


def main(argv: Sequence[str] | None = None) -> None:
    run_service(SERVICE, DriverSettings, serve, argv)


if __name__ == "__main__":
    main()
