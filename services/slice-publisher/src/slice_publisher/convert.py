"""draflow inventory messages (``draflow.inventory.v1``) → :class:`DesiredPool` in API JSON form. Pure.

Field by field: the inventory proto mirrors ``resource.k8s.io/v1`` (see ``protos/.../inventory.proto``),
so each message maps to the JSON the API server serves. Unset optional fields are left out.
"""

from __future__ import annotations

from typing import Any

from draflow_protos.inventory.v1 import inventory_pb2 as inv
from slice_publisher.splitter import DesiredPool

_ATTR_KINDS = {
    "int_value": "int",
    "bool_value": "bool",
    "string_value": "string",
    "version_value": "version",
    "int_values": "ints",
    "bool_values": "bools",
    "string_values": "strings",
    "version_values": "versions",
}


def _attribute(attr: inv.DeviceAttribute) -> dict[str, Any]:
    which = attr.WhichOneof("value")
    if which is None:
        return {}
    value = getattr(attr, which)
    if which.endswith("_values"):
        value = list(value.values)
    return {_ATTR_KINDS[which]: value}


def _capacity(cap: inv.DeviceCapacity) -> dict[str, Any]:
    out: dict[str, Any] = {"value": cap.value}
    if cap.HasField("request_policy"):
        pol = cap.request_policy
        policy: dict[str, Any] = {}
        if pol.HasField("default"):
            policy["default"] = pol.default
        if pol.valid_values:
            policy["validValues"] = list(pol.valid_values)
        if pol.HasField("valid_range"):
            rng = {
                k: getattr(pol.valid_range, k) for k in ("min", "max", "step") if pol.valid_range.HasField(k)
            }
            policy["validRange"] = rng
        out["requestPolicy"] = policy
    return out


def _counters(counters: Any) -> dict[str, Any]:
    return {name: {"value": value} for name, value in sorted(counters.items())}


def node_selector(sel: inv.NodeSelector) -> dict[str, Any]:
    def reqs(items: Any) -> list[dict[str, Any]]:
        out = []
        for r in items:
            req: dict[str, Any] = {"key": r.key, "operator": r.operator}
            if r.values:
                req["values"] = list(r.values)
            out.append(req)
        return out

    terms = []
    for term in sel.node_selector_terms:
        t: dict[str, Any] = {}
        if term.match_expressions:
            t["matchExpressions"] = reqs(term.match_expressions)
        if term.match_fields:
            t["matchFields"] = reqs(term.match_fields)
        terms.append(t)
    return {"nodeSelectorTerms": terms}


def device(dev: inv.Device) -> dict[str, Any]:
    out: dict[str, Any] = {"name": dev.name}
    if dev.attributes:
        out["attributes"] = {k: _attribute(v) for k, v in sorted(dev.attributes.items())}
    if dev.capacity:
        out["capacity"] = {k: _capacity(v) for k, v in sorted(dev.capacity.items())}
    if dev.consumes_counters:
        out["consumesCounters"] = [
            {"counterSet": c.counter_set, "counters": _counters(c.counters)} for c in dev.consumes_counters
        ]
    if dev.node_name:
        out["nodeName"] = dev.node_name
    if dev.HasField("node_selector"):
        out["nodeSelector"] = node_selector(dev.node_selector)
    if dev.all_nodes:
        out["allNodes"] = True
    if dev.taints:
        out["taints"] = [
            {
                k: v
                for k, v in (
                    ("key", t.key),
                    ("value", t.value),
                    ("effect", t.effect),
                    ("timeAdded", t.time_added),
                )
                if v
            }
            for t in dev.taints
        ]
    if dev.HasField("binds_to_node"):
        out["bindsToNode"] = dev.binds_to_node
    if dev.binding_conditions:
        out["bindingConditions"] = list(dev.binding_conditions)
    if dev.binding_failure_conditions:
        out["bindingFailureConditions"] = list(dev.binding_failure_conditions)
    if dev.HasField("allow_multiple_allocations"):
        out["allowMultipleAllocations"] = dev.allow_multiple_allocations
    return out


def placement(pool: inv.Pool, node_name: str) -> dict[str, Any]:
    """The ResourceSliceSpec placement of a pool: its own, else node-local on ``node_name``."""
    if pool.per_device_node_selection:
        return {"perDeviceNodeSelection": True}
    if pool.all_nodes:
        return {"allNodes": True}
    if pool.HasField("node_selector") and pool.node_selector.node_selector_terms:
        return {"nodeSelector": node_selector(pool.node_selector)}
    return {"nodeName": pool.node_name or node_name}


def pools_from_response(
    resp: inv.ListAndWatchResourcesResponse, driver: str, node_name: str
) -> list[DesiredPool]:
    """Every pool of one inventory message; ``driver``/``node_name`` are the registered ones (the
    message's own fields are only checked by the caller)."""
    out = []
    for pool in resp.pools:
        out.append(
            DesiredPool(
                driver=driver,
                name=pool.name or node_name,
                owner_node=node_name,
                placement=placement(pool, node_name),
                devices=tuple(device(d) for d in pool.devices),
                shared_counters=tuple(
                    {"name": cs.name, "counters": _counters(cs.counters)} for cs in pool.shared_counters
                ),
                generation_hint=pool.generation,
                partition_type_attribute=pool.partition_type_attribute,
            )
        )
    return out
