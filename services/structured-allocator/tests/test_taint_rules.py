"""DeviceTaintRules: the effective taints of a device are its own plus those of matching rules."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import DRIVER, NODE, claim, dclass, dev, req, rslice

from structured_allocator.core import AllocatedState, Allocator, SliceIndex
from structured_allocator.core.taint_rules import apply_taint_rules, rule_matches, rule_taint

NO_SCHEDULE = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}


def rule(name: str, effect: str = "NoSchedule", **selector: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"deviceSelector": selector, "taint": {**NO_SCHEDULE, "effect": effect}}}


@pytest.mark.parametrize(("selector", "device", "matches"), [
    pytest.param({}, ("d", "p", "x"), True, id="empty-selector-matches-everything"),
    pytest.param({"driver": "d"}, ("d", "p", "x"), True, id="driver"),
    pytest.param({"driver": "other"}, ("d", "p", "x"), False, id="other-driver"),
    pytest.param({"driver": "d", "pool": "p"}, ("d", "p", "x"), True, id="driver-and-pool"),
    pytest.param({"pool": "q"}, ("d", "p", "x"), False, id="other-pool"),
    pytest.param({"device": "x"}, ("d", "p", "x"), True, id="device-in-any-pool"),
    pytest.param({"driver": "d", "pool": "p", "device": "y"}, ("d", "p", "x"), False, id="other-device"),
])
def test_rule_selector(selector: dict[str, str], device: tuple[str, str, str], matches: bool) -> None:
    assert rule_matches(rule("r", **selector), *device) is matches


def test_a_rule_without_a_selector_selects_nothing_and_an_empty_string_field_is_set() -> None:
    # v1 DeviceTaintRuleSpec: "The empty selector matches all devices. Without a selector, no devices are
    # matched." A field that is set, even to "", must equal the device's.
    no_selector = rule("r")
    del no_selector["spec"]["deviceSelector"]
    assert not rule_matches(no_selector, "d", "p", "x")
    s = rslice("s", [dev("gpu-0")], rv="7")
    assert apply_taint_rules(s, [no_selector]) is s
    assert not rule_matches(rule("r", driver=""), "d", "p", "x")


def test_rule_taint_defaults_time_added_to_creation() -> None:
    assert rule_taint(rule("r"))["timeAdded"] == "2026-01-01T00:00:00Z"
    explicit = rule("r")
    explicit["spec"]["taint"]["timeAdded"] = "2026-02-02T00:00:00Z"
    assert rule_taint(explicit)["timeAdded"] == "2026-02-02T00:00:00Z"


def test_slice_untouched_by_rules_is_returned_as_is() -> None:
    s = rslice("s", [dev("gpu-0")], rv="7")
    assert apply_taint_rules(s, []) is s
    assert apply_taint_rules(s, [rule("r", driver="other")]) is s
    assert apply_taint_rules(s, [rule("r", device="gpu-9")]) is s


def test_matching_devices_get_the_rule_taint_appended_and_the_input_is_not_mutated() -> None:
    own = {"key": "own", "effect": "NoExecute"}
    s = rslice("s", [dev("gpu-0", taints=[own]), dev("gpu-1")], rv="7")
    out = apply_taint_rules(s, [rule("r", driver=DRIVER, device="gpu-0")])
    taints = [d.get("taints") for d in out["spec"]["devices"]]
    assert taints == [[own, {**NO_SCHEDULE, "timeAdded": "2026-01-01T00:00:00Z"}], None]
    assert s["spec"]["devices"][0]["taints"] == [own]
    assert s["metadata"]["resourceVersion"] == "7"
    assert out["metadata"]["resourceVersion"].startswith("7+rules.")


def test_resource_version_changes_with_the_effective_taints() -> None:
    s = rslice("s", [dev("gpu-0")], rv="7")
    a = apply_taint_rules(s, [rule("a")])["metadata"]["resourceVersion"]
    b = apply_taint_rules(s, [rule("a", effect="NoExecute")])["metadata"]["resourceVersion"]
    c = apply_taint_rules(s, [rule("a"), rule("b")])["metadata"]["resourceVersion"]
    assert len({a, b, c}) == 3
    assert apply_taint_rules(s, [rule("b"), rule("a")])["metadata"]["resourceVersion"] == c


def test_slice_index_reprepares_a_slice_when_rules_change() -> None:
    index = SliceIndex()
    s = rslice("s", [dev("gpu-0")], rv="7")
    index.upsert(apply_taint_rules(s, [rule("a")]))
    assert next(iter(index)).devices[0].taints
    index.upsert(apply_taint_rules(s, []))
    assert not next(iter(index)).devices[0].taints


TOLERATE = [{"key": "maintenance", "operator": "Exists"}]
GPU = dclass("gpu", f'device.driver == "{DRIVER}"')


@pytest.mark.parametrize(("effect", "tolerations", "device"), [
    pytest.param("NoSchedule", None, "gpu-1", id="no-schedule-blocks"),
    pytest.param("NoExecute", None, "gpu-1", id="no-execute-blocks"),
    pytest.param("None", None, "gpu-0", id="effect-none-is-informational"),
    pytest.param("NoSchedule", TOLERATE, "gpu-0", id="tolerated"),
])
def test_allocator_honours_rule_taints(effect: str, tolerations: Any, device: str) -> None:
    s = apply_taint_rules(rslice("s", [dev("gpu-0"), dev("gpu-1")]), [rule("r", effect, device="gpu-0")])
    allocator = Allocator({"gpu": GPU}, [s], AllocatedState())
    outcome = allocator.allocate(NODE, [claim("c", req("gpu", tolerations=tolerations))])
    assert outcome.fits
    (result,) = outcome.results[0]["devices"]["results"]
    assert result["device"] == device


def test_explanation_counts_devices_blocked_by_rule_taints() -> None:
    s = apply_taint_rules(rslice("s", [dev("gpu-0"), dev("gpu-1")]), [rule("r", pool="node-1")])
    allocator = Allocator({"gpu": GPU}, [s], AllocatedState())
    outcome = allocator.allocate(NODE, [claim("c", req("gpu"))])
    assert not outcome.fits
    (entry,) = outcome.explanation.requests
    assert entry.blocked_by_taints == 2
    assert entry.usable == 0
    assert "taints" in outcome.explanation.summary

