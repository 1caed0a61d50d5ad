"""Entry point ``claim-controller``: the service context (tracing, KubeClient, NATS, /metrics + health,
leader election; :mod:`draflow_runtime.servicecontext`), then the controller of each leadership term.

Only the leader runs informers and workers; a replica that loses the lease stops them and campaigns again
(every reconcile is idempotent, so the next leader simply starts from its fresh caches).
"""

from __future__ import annotations

from draflow_runtime.service import run_service
from draflow_runtime.servicecontext import ServiceContext

from .controller import COMPONENT, Controller
from .settings import Settings


async def serve(settings: Settings) -> None:
    """Run the service until cancelled."""
    async with ServiceContext(COMPONENT, settings) as svc:
        bus = await svc.connect_bus()
        current: list[Controller] = []
        await svc.serve_http(ready=lambda: svc.standby or (bool(current) and current[-1].synced))

        async def term() -> None:
            controller = Controller(settings, svc.kube, bus=bus if bus.enabled else None,
                                    requester=bus if bus.enabled else None,
                                    namespace=settings.namespace or None)
            current.append(controller)
            try:
                await controller.run()
            finally:
                current.remove(controller)

        await svc.lead(term)


def main() -> None:
    run_service(COMPONENT, Settings, serve)


if __name__ == "__main__":
    main()
