"""What the node agents (reference-driver, kubelet-dra-shim, slice-publisher) share about their nodes.

Single-node mode serves ``--node-name`` (``$NODE_NAME`` in a DaemonSet, else the hostname). Fleet mode serves
many simulated nodes from one process: ``--nodes a,b,node-0..node-199`` or ``--node-count N`` with
``--node-name-prefix``.
"""

from __future__ import annotations

import os
import re
import socket

from pydantic import Field, model_validator

from draflow_runtime.settings import DEFAULT_DOC_KEY, EventLoop, ServiceSettings

_RANGE = re.compile(r"^(?P<prefix>.*?)(?P<start>\d+)\.\.(?P=prefix)(?P<end>\d+)$")


def default_node_name() -> str:
    """``$NODE_NAME`` (the downward API in a DaemonSet), else the hostname."""
    return os.environ.get("NODE_NAME") or socket.gethostname()


def expand_nodes(spec: str) -> list[str]:
    """``"a,node-0..node-2"`` -> ``["a", "node-0", "node-1", "node-2"]``.

    Raises ValueError for a malformed range, a range that ends before it starts, or repeated names.
    """
    nodes: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        match = _RANGE.match(part)
        if match is None:
            if ".." in part:
                raise ValueError(f"bad node range {part!r}: want e.g. node-0..node-199")
            nodes.append(part)
            continue
        start, end = int(match["start"]), int(match["end"])
        if end < start:
            raise ValueError(f"bad node range {part!r}: end before start")
        nodes.extend(f"{match['prefix']}{i}" for i in range(start, end + 1))
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"duplicate node names in {spec!r}")
    return nodes


class NodeSettings(ServiceSettings):
    """The node (single-node mode) or nodes (fleet mode) a node agent serves."""

    # The node agents speak gRPC (grpc.aio): a unary call over a unix socket costs ~35 % more CPU on
    # uvloop than on the standard loop (grpc.aio polls from a thread of its own there).
    event_loop: EventLoop = Field(
        "asyncio",
        description="asyncio event loop: asyncio (the standard library's: grpc.aio is cheaper on it) or "
        "uvloop.",
    )

    node_name: str = Field(
        default_factory=default_node_name,
        description="Node served in single-node mode.",
        json_schema_extra={DEFAULT_DOC_KEY: "$NODE_NAME, else the hostname"},
    )


class FleetSettings(NodeSettings):
    """NodeSettings plus the fleet-mode node list (exactly one of ``nodes`` and ``node_count``)."""

    nodes: str = Field(
        "", description="Fleet mode: nodes to serve, comma separated; 'node-0..node-199' expands a range."
    )
    node_name_prefix: str = Field("sim-", description="Fleet mode with --node-count: node name prefix.")
    node_count: int = Field(0, ge=0, description="Fleet mode: serve <prefix>0 .. <prefix><count-1>.")

    @model_validator(mode="after")
    def _check_fleet(self) -> FleetSettings:
        if self.nodes and self.node_count:
            raise ValueError("set either nodes or node_count, not both")
        if self.nodes:
            expand_nodes(self.nodes)
        return self

    @property
    def fleet_mode(self) -> bool:
        return bool(self.nodes or self.node_count)

    def node_names(self) -> list[str]:
        """The nodes this process serves, in order."""
        if self.nodes:
            return expand_nodes(self.nodes)
        if self.node_count:
            return [f"{self.node_name_prefix}{i}" for i in range(self.node_count)]
        return [self.node_name]
