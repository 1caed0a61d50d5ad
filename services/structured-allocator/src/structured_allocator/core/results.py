"""Building each claim's ``status.allocation`` from a finished search: results, config (class then
claim, ``requests`` dropped when it covers every request), node selector (pinned to the node when a
device is node-local or ``bindsToNode``, else the merged slice node selectors), ``allocationTimestamp``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .types import AllocationError

if TYPE_CHECKING:
    from .allocator import _Run
    from .requests import RequestData

__all__ = ["allocation_result"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def allocation_result(run: _Run, ci: int) -> dict[str, Any]:
    claim = run.claims[ci]
    devices: dict[str, Any] = {"results": run.results[ci]}
    config = _config(run, ci, claim)
    if config:
        devices["config"] = config
    allocation: dict[str, Any] = {"devices": devices}
    selector = _node_selector(run, ci)
    if selector is not None:
        allocation["nodeSelector"] = selector
    if run.features.device_binding_and_status:
        # kube-scheduler (PreBind) stamps every allocation it writes when DRADeviceBindingConditions
        # and DRAResourceClaimDeviceStatus are both on, with or without binding conditions.
        allocation["allocationTimestamp"] = _timestamp(run)
    return allocation


def _timestamp(run: _Run) -> str:
    """The clock's time to the second; the text is formatted once per second (strftime was a few
    per cent of a decision's CPU: every feasible node's allocation gets a timestamp)."""
    now = run.a.clock().astimezone(UTC)
    since = now - _EPOCH
    second = since.days * 86400 + since.seconds  # exact: whole seconds, no float
    last = run.a.last_timestamp
    if last is None or last[0] != second:
        last = run.a.last_timestamp = (second, now.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return last[1]


def _chosen(run: _Run, ci: int) -> list[RequestData]:
    out = []
    for ri, datas in enumerate(run.requests[ci]):
        out.append(datas[run.selected_sub.get((ci, ri), 0)] if datas[0].sub_index >= 0 else datas[0])
    return out


def _config(run: _Run, ci: int, claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    chosen = _chosen(run, ci)
    config: list[dict[str, Any]] = []
    class_ranges: dict[str, tuple[int, int]] = {}
    for rd in chosen:
        rng = class_ranges.get(rd.class_name)
        if rng is not None:
            for i in range(*rng):
                config[i]["requests"].append(rd.name)
            continue
        start = len(config)
        for entry in (rd.device_class.get("spec") or {}).get("config") or []:
            config.append({"source": "FromClass", "requests": [rd.name], **_device_config(entry)})
        class_ranges[rd.class_name] = (start, len(config))
    for entry in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        requests = list(entry.get("requests") or [])
        if not requests or any(rd.base_name in requests or rd.name in requests for rd in chosen):
            item: dict[str, Any] = {"source": "FromClaim"}
            if requests:
                item["requests"] = requests
            item.update(_device_config(entry))
            config.append(item)
    for item in config:
        listed = item.get("requests")
        if listed and all(rd.base_name in listed or rd.name in listed for rd in chosen):
            del item["requests"]
    return config


def _node_selector(run: _Run, ci: int) -> dict[str, Any] | None:
    fields_: list[dict[str, Any]] = []
    exprs: list[dict[str, Any]] = []
    for s, d in run.result_devices[ci]:
        node_name, selector = (
            (d.node_name, d.node_selector) if s.per_device else (s.node_name, s.node_selector)
        )
        if node_name or d.binds_to_node:
            return {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [run.node_name]}]}
                ]
            }
        if selector is not None:
            terms = selector.get("nodeSelectorTerms") or []
            if len(terms) > 1:
                raise AllocationError(
                    f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms",
                    claim=run.claim_name(ci),
                )
            if terms:
                _merge(terms[0].get("matchFields") or [], fields_)
                _merge(terms[0].get("matchExpressions") or [], exprs)
    if not fields_ and not exprs:
        return None
    term: dict[str, Any] = {}
    if exprs:
        term["matchExpressions"] = exprs
    if fields_:
        term["matchFields"] = fields_
    return {"nodeSelectorTerms": [term]}


def _device_config(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("requests", "source")}


def _merge(src: list[Mapping[str, Any]], dst: list[dict[str, Any]]) -> None:
    for req in src:
        values = set(req.get("values") or [])
        if not any(
            e.get("key") == req.get("key")
            and e.get("operator") == req.get("operator")
            and set(e.get("values") or []) == values
            for e in dst
        ):
            dst.append(dict(req))
