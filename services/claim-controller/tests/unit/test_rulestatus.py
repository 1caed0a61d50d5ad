"""The EvictionInProgress condition of a DeviceTaintRule, as upstream's eviction controller words it."""

from __future__ import annotations

from typing import Any

import pytest

from claim_controller.rulestatus import Counts, needs_write, rule_condition, wait_before_update
from draflow_runtime.devicetaints import parse_time


def rule(effect: str, generation: int = 2, condition: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "r", "generation": generation},
            "spec": {"taint": {"key": "k", "effect": effect}},
            "status": {"conditions": [condition] if condition else []}}


@pytest.mark.parametrize(("effect", "counts", "status", "reason", "message"), [
    ("NoExecute", Counts(pending_pods=1, pending_namespaces=1), "True", "PodsPendingEviction",
     "1 pod needs to be evicted in 1 namespace."),
    ("NoExecute", Counts(pending_pods=3, pending_namespaces=2, evicted=1), "True", "PodsPendingEviction",
     "3 pods need to be evicted in 2 different namespaces. 1 pod evicted since starting the controller."),
    ("NoExecute", Counts(evicted=2), "False", "Completed", "2 pods evicted since starting the controller."),
    ("NoExecute", Counts(), "False", "NotStarted", ""),
    ("NoSchedule", Counts(), "False", "OtherEffect", "Eviction only happens for the NoExecute effect."),
    ("None", Counts(pending_pods=1, pending_namespaces=1, slice_devices=1, allocated_devices=1), "False",
     "NoEffect", "1 published device selected. 1 allocated device selected. 1 pod would be evicted in "
     "1 namespace if the effect was NoExecute. This information will not be updated again. Recreate the "
     "DeviceTaintRule to trigger an update."),
    ("None", Counts(slice_devices=4), "False", "NoEffect",
     "4 published devices selected. 0 allocated devices selected. 0 pods would be evicted in 0 different "
     "namespaces if the effect was NoExecute. This information will not be updated again. Recreate the "
     "DeviceTaintRule to trigger an update."),
])
def test_condition_text(effect: str, counts: Counts, status: str, reason: str, message: str) -> None:
    assert rule_condition(rule(effect), counts) == {
        "type": "EvictionInProgress", "status": status, "reason": reason, "message": message,
        "observedGeneration": 2,
    }


def test_updates_are_rate_limited_per_generation() -> None:
    t = parse_time("2026-01-01T00:00:00Z")
    assert t is not None
    written = {"type": "EvictionInProgress", "status": "True", "reason": "PodsPendingEviction",
               "message": "m", "observedGeneration": 2, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert wait_before_update(rule("NoExecute"), t, 10) == 0, "no condition yet: now"
    assert wait_before_update(rule("NoExecute", condition=written), t + 4, 10) == 6
    assert wait_before_update(rule("NoExecute", condition=written), t + 10, 10) == 0
    changed = rule("NoExecute", generation=3, condition=written)
    assert wait_before_update(changed, t + 1, 10) == 0, "spec changed"


def test_write_only_on_change_ignoring_transition_time() -> None:
    new = rule_condition(rule("NoExecute"), Counts())
    current = {**new, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert not needs_write(rule("NoExecute", condition=current), new)
    assert needs_write(rule("NoExecute", condition={**current, "message": "old"}), new)
    assert needs_write(rule("NoExecute"), new)
