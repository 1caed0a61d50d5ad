"""The conformance table's case format and runner (shared by every ``test_conformance_*.py``).

A :class:`Case` names the input (classes, slices, what is already allocated, the claims to allocate,
the node, the feature gates) and the expected outcome: the full ``status.allocation`` dicts, or
"does not fit" (with optional explanation checks), or an error type + message fragment.
``upstream`` lists the names of the cases in k8s.io/dynamic-resource-allocation v0.37.1
``structured/internal/allocatortesting/allocator_testing.go`` that the case covers (the complete
mapping, including the cases draflow deliberately does not follow, is in ``conformance_map.py``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest
from sa_builders import DRIVER, FIXED_NOW, NODE, claim, dclass, dev, req, res, rslice, share, share_ids

from structured_allocator.core import AllocatedState, AllocationError, Allocator, DeviceID, Features

GPU_CLASS = dclass("gpu", f'device.driver == "{DRIVER}"')
MEM = f'device.capacity["{DRIVER}"].memory'
STAMP = FIXED_NOW.strftime("%Y-%m-%dT%H:%M:%SZ")


def attr(name: str) -> str:
    """CEL for one attribute of the test driver's devices."""
    return f'device.attributes["{DRIVER}"].{name}'


@dataclass
class Case:
    claims: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    expect: list[dict[str, Any]] | None = None  # None: does not fit
    classes: list[dict[str, Any]] = field(default_factory=lambda: [GPU_CLASS])
    allocated: list[dict[str, Any]] = field(default_factory=list)  # claims with status.allocation
    allocated_devices: tuple[str, ...] = ()  # "pool/device" of the test driver, allocated exclusively
    node: dict[str, Any] = field(default_factory=lambda: NODE)
    features: Features = field(default_factory=Features.all)
    error: tuple[type[Exception], str] | None = None
    summary: str | None = None  # expected explanation summary when it does not fit
    explain: dict[str, dict[str, Any]] | None = None  # request name -> expected count fields
    admin_allowed: bool = True
    upstream: tuple[str, ...] = ()
    max_steps: int | None = None  # the search visits at most this many states (allocateOne calls)


DRIVER_B = "nic.example.com"
NIC_CLASS = dclass("nic", f'device.driver == "{DRIVER_B}"')
NODE2 = {"metadata": {"name": "node-2", "labels": {"zone": "b", "rack": "r2"}}}


def pin(node: str) -> dict[str, Any]:
    """The node selector of an allocation restricted to one node."""
    return {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    }


def labels(**kv: str) -> dict[str, Any]:
    """A node selector requiring every label ``key=value`` (one term)."""
    exprs = [{"key": k, "operator": "In", "values": [v]} for k, v in kv.items()]
    return {"nodeSelectorTerms": [{"matchExpressions": exprs}]}


MULTI_CLASS = dclass("gpu", f'device.driver == "{DRIVER}" && device.allowMultipleAllocations == true')
DEDICATED_CLASS = dclass("gpu", f'device.driver == "{DRIVER}" && device.allowMultipleAllocations == false')


def multi_dev(
    name: str, cap: dict[str, Any] | None = None, attrs: dict[str, Any] | None = None, **extra: Any
) -> Any:
    """A device with ``allowMultipleAllocations: true``."""
    return dev(name, attrs, cap, allowMultipleAllocations=True, **extra)


def range_cap(
    value: str, default: str = "2", lo: str = "2", step: str | None = "2", hi: str | None = "4"
) -> Any:
    """A capacity with a validRange request policy (by default: default 2, min 2, step 2, max 4)."""
    rng: dict[str, str] = {"min": lo}
    if step is not None:
        rng["step"] = step
    if hi is not None:
        rng["max"] = hi
    return {"value": value, "requestPolicy": {"default": default, "validRange": rng}}


def values_cap(value: str, default: str, *more: str) -> Any:
    """A capacity with a validValues request policy: the default, then ``more``."""
    return {"value": value, "requestPolicy": {"default": default, "validValues": [default, *more]}}


def shared(request: str, device: str, n: int, pool: str = "node-1", **consumed: str) -> Any:
    """An expected result on a multi-allocatable device: share ID ``n`` of this call, consumed capacity."""
    out = res(request, device, pool=pool, shareID=share(n))
    if consumed:
        out["consumedCapacity"] = consumed
    return out


def counters(name: str, pool: str = "node-1", count: int = 2, **sets: dict[str, str]) -> Any:
    """A slice that only carries sharedCounters: ``sets`` = counter set name -> {counter: value}."""
    shared_counters = [
        {"name": n.replace("_", "-"), "counters": {k: {"value": v} for k, v in c.items()}}
        for n, c in sets.items()
    ]
    return rslice(name, [], pool=pool, count=count, sharedCounters=shared_counters)


def consumes(counter_set: str, groups: tuple[str, ...] = (), **values: str) -> dict[str, Any]:
    """One consumesCounters entry (``groups``: compatibilityGroups)."""
    entry: dict[str, Any] = {
        "counterSet": counter_set,
        "counters": {k: {"value": v} for k, v in values.items()},
    }
    if groups:
        entry["compatibilityGroups"] = list(groups)
    return entry


def gpus(n: int, **attrs_per: Any) -> list[dict[str, Any]]:
    return [dev(f"gpu-{i}", {k: v[i] for k, v in attrs_per.items()} or None) for i in range(n)]


def exclusive_alloc(*devices: str, pool: str = "node-1") -> dict[str, Any]:
    from sa_builders import alloc

    return claim("existing", req("gpu"), allocation=alloc(*[res("gpu", d, pool=pool) for d in devices]))


def shared_alloc(device: str, sid: int, pool: str = "node-1", **consumed: str) -> dict[str, Any]:
    from sa_builders import alloc

    result = res("gpu", device, pool=pool, shareID=share(sid), consumedCapacity=consumed)
    return claim(f"existing-{sid}", req("gpu"), allocation=alloc(result))


def state_of(case: Case) -> AllocatedState:
    state = AllocatedState.from_claims(case.allocated)
    for item in case.allocated_devices:
        pool, _, device = item.rpartition("/")
        state.devices.add(DeviceID(DRIVER, pool or "node-1", device))
    return state


def run_case(case: Case):  # type: ignore[no-untyped-def]
    allocator = Allocator(
        {c["metadata"]["name"]: c for c in case.classes},
        case.slices,
        state_of(case),
        case.features,
        new_share_id=share_ids(),
        clock=lambda: FIXED_NOW,
    )
    outcome = allocator.allocate(case.node, case.claims, admin_access_allowed=case.admin_allowed)
    return outcome, allocator


def check_case(case: Case) -> None:
    before = copy.deepcopy((case.claims, case.slices, case.classes, case.allocated))
    try:
        _check(case)
    finally:
        assert (case.claims, case.slices, case.classes, case.allocated) == before, "inputs were modified"


def _check(case: Case) -> None:
    if case.error is not None:
        exc_type, message = case.error
        with pytest.raises(exc_type) as info:
            run_case(case)
        assert message in str(info.value)
        assert isinstance(info.value, AllocationError)
        return
    outcome, _ = run_case(case)
    if case.max_steps is not None:
        assert 0 < outcome.states <= case.max_steps
    if case.expect is None:
        assert not outcome.fits, outcome.results
        assert outcome.results == []
        explanation = outcome.explanation
        assert explanation is not None
        if case.summary is not None:
            assert explanation.summary == case.summary
        for name, fields_ in (case.explain or {}).items():
            entry = next(r for r in explanation.requests if r.request == name)
            for k, v in fields_.items():
                assert getattr(entry, k) == v, (k, entry)
        assert explanation.to_dict()["node"] == case.node["metadata"]["name"]
        return
    assert outcome.fits, outcome.explanation and outcome.explanation.summary
    results = copy.deepcopy(outcome.results)
    for allocation in results:
        # Every allocation is stamped when both binding gates are on (kube-scheduler's PreBind does).
        stamp = allocation.pop("allocationTimestamp", None)
        assert stamp == (STAMP if case.features.device_binding_and_status else None), allocation
    expect = [{k: v for k, v in a.items() if k != "allocationTimestamp"} for a in case.expect]
    assert results == expect


def params(cases: dict[str, Case]) -> list[Any]:
    return [pytest.param(c, id=name) for name, c in cases.items()]


__all__ = [
    "DEDICATED_CLASS",
    "DRIVER",
    "DRIVER_B",
    "GPU_CLASS",
    "MEM",
    "MULTI_CLASS",
    "NIC_CLASS",
    "NODE2",
    "STAMP",
    "Case",
    "attr",
    "check_case",
    "consumes",
    "counters",
    "exclusive_alloc",
    "gpus",
    "labels",
    "multi_dev",
    "params",
    "pin",
    "range_cap",
    "rslice",
    "run_case",
    "shared",
    "shared_alloc",
    "values_cap",
]
