"""The workloads: upstream's scheduler_perf DRA test cases (``dra/performance-config.yaml``, v1.37.1).

``scale`` shrinks every count (nodes, claims, pods) by the same factor for development (``--quick`` is
0.1); the steady-state duration is not scaled.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from sidebyside.objects import CEL_SELECTOR, PCI_ROOT


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    upstream: str  # the scheduler_perf test case and workload it reproduces
    nodes: int
    devices: int  # per node (one ResourceSlice each)
    mode: Literal["burst", "steady"]
    measure_pods: int = 0  # burst: created at once; steady: the backlog kept (upstream: 10)
    init_claims: int = 0  # allocated directly, without pods (upstream's allocResourceClaims)
    shared: bool = False  # pods name claims (five pods per claim) instead of a template
    init_pods: int = 0  # shared: pods scheduled (not measured) before the measured ones
    # steady: seconds of the measured window; upstream's 10 s holds too few pods at a few pods/s, so 30 s
    duration: float = 0.0
    pci_roots: int = 2
    requests: int = 1
    cel: str = ""
    match_attribute: str = ""

    def scaled(self, scale: float) -> Workload:
        if scale == 1:
            return self

        def s(n: int) -> int:
            return max(1, round(n * scale)) if n else 0

        return dataclasses.replace(
            self, nodes=s(self.nodes), init_claims=s(self.init_claims), init_pods=s(self.init_pods),
            measure_pods=self.measure_pods if self.mode == "steady" else s(self.measure_pods))

    @property
    def shape(self) -> str:
        parts = [f"{self.nodes} nodes x {self.devices} devices"]
        if self.init_claims:
            parts.append(f"{self.init_claims} claims allocated before (no pods)")
        if self.init_pods:
            parts.append(f"{self.init_pods} pods scheduled before (not measured)")
        if self.mode == "burst":
            parts.append(f"{self.measure_pods} measured pods created at once (30 creators)")
        else:
            parts.append(f"steady state for {self.duration:.0f} s: {self.measure_pods} pods pending, each "
                         "bound pod deleted and replaced")
        if self.shared:
            parts.append("five pods share each claim")
        if self.requests > 1:
            parts.append(f"{self.requests} requests per claim")
        if self.cel:
            parts.append("CEL selector on driverVersion and memory")
        if self.match_attribute:
            parts.append(f"matchAttribute {self.match_attribute}")
        return "; ".join(parts)


WORKLOADS = (
    Workload("template", "SchedulingWithResourceClaimTemplate 5000pods_500nodes",
             "SchedulingWithResourceClaimTemplate/5000pods_500nodes", nodes=500, devices=10, mode="burst",
             init_claims=2500, measure_pods=2500),
    Workload("stream", "SchedulingWithResourceClaimTemplate, 5000 pods filling 500 empty nodes",
             "SchedulingWithResourceClaimTemplate/5000pods_500nodes without init claims", nodes=500,
             devices=10, mode="burst", measure_pods=5000),
    Workload("steady", "SteadyStateClusterResourceClaimTemplate half_500nodes",
             "SchedulingWithResourceClaimTemplate/half_500nodes (steadyState)", nodes=500, devices=10,
             mode="steady", init_claims=2500, measure_pods=10, duration=30.0),
    Workload("shared", "SchedulingWithResourceClaim (shared claims) 5000pods_500nodes",
             "SchedulingWithResourceClaim/5000pods_500nodes", nodes=500, devices=2, mode="burst",
             shared=True, init_pods=2500, measure_pods=2500),
    Workload("celmatch", "CEL selector + matchAttribute, steady state on 500 empty nodes",
             "SchedulingWithResourceClaimTemplate/selector_empty_500nodes + match_empty_500nodes",
             nodes=500, devices=10, mode="steady", measure_pods=10, duration=30.0, requests=5,
             cel=CEL_SELECTOR, match_attribute=PCI_ROOT),
)
BY_NAME = {w.name: w for w in WORKLOADS}
