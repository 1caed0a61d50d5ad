"""A real local control plane for tests and `make up`.

kube-apiserver + etcd, nats-server with JetStream and Jaeger v2, on loopback; see ``environment``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from draflow_testenv.environment import Environment

__all__ = ["Environment"]


def __getattr__(name: str) -> Any:  # lazy: the pytest plugin imports this package on every run
    if name == "Environment":
        from draflow_testenv.environment import Environment

        return Environment
    raise AttributeError(name)
