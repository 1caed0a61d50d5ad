# ruff: noqa: E501  (a data table: upstream test names are long)
"""How draflow covers every case of kube-scheduler's DynamicResources plugin tests (:mod:`plugin_cases`).

Each upstream name is mapped exactly one way (``test_plugin_map.py`` checks it):

* ``COVERED``: the draflow tests that restate it — ``<file>::<test>`` under ``tests/`` (the test must
  exist) or ``conformance:<case>`` (a case of upstream's allocator table that ``conformance_map`` maps to
  draflow cases; the plugin case only passes it through to the allocator);
* ``DIFFERS``: draflow deliberately does something else; the reason names the design difference and a
  phrase of the allocator README that documents it (checked to be there);
* ``NOT_APPLICABLE``: pure Go-framework plumbing with nothing a user of draflow could observe;
* ``NOT_YET``: not restated yet — what is missing (the list is meant to be empty).

Where upstream's unit test runs on a fake clientset, draflow's restatement runs on the real API server
when the case is about writes (``integration/``), in memory when it is about the decision.
"""

from __future__ import annotations

from typing import NamedTuple

from plugin_cases import UPSTREAM_CASES
from plugin_covered import COVERED

__all__ = ["COVERED", "DIFFERS", "NOT_APPLICABLE", "NOT_YET", "UPSTREAM_CASES", "Difference", "mapping"]


class Difference(NamedTuple):
    why: str
    readme: str  # a phrase of services/structured-allocator/README.md that documents it


QUEUEING = Difference(
    "no queueing hints: a pending pod is retried on every event of a claim it uses and on slice, class, "
    "node and freed-device events, not filtered per event as kube-scheduler's hints do (NATS nudges "
    "instead of hints)",
    "Such pods are retried when slices, classes, nodes or one of their claims change, when any claim "
    "frees devices")
NO_PREEMPTION = Difference("draflow does not preempt (nor simulate in-place resizes for preemption)",
                           "volume plugins (VolumeBinding, VolumeZone, NodeVolumeLimits, VolumeRestrictions), "
                           "preemption")

SCORING = Difference(
    "no score normalisation: kube-scheduler scales each plugin's scores to 0-100 to weigh plugins against "
    "each other; draflow has no other plugins, it ranks nodes by the firstAvailable score, then the scorer",
    "so it ranks first and the scorer only breaks ties")


DIFFERS: dict[str, Difference] = {
    **{name: QUEUEING for name in UPSTREAM_CASES if name.startswith((
        "TestIsSchedulableAfterClaimChange/", "TestIsSchedulableAfterTargetPodUpdate/", "TestPreQueueingHint"))},
    "TestDynamicResources_DeferredResizeSkipped": NO_PREEMPTION,
    **{name: SCORING for name in UPSTREAM_CASES if name.startswith("TestNormalizeScore/")},
}

NOT_APPLICABLE: dict[str, str] = {
    "TestPostFilterNoOpStatusHasNoUserVisibleReason/plugin disabled":
        "n/a: a DynamicResources plugin object that was never enabled; draflow is always DRA",
    "TestPodGroupPostFilter/disabled": "n/a: the plugin switched off (DynamicResourceAllocation is GA and locked on)",
    "TestPlugin/DRA-disabled": "n/a: DynamicResourceAllocation is GA and locked to true since 1.35 (draflow knows "
                               "no such gate: DynamicResourceAllocation=false is refused as unrecognized)",
    **{name: "n/a: upstream picks one of its three allocator builds (stable, incubating, experimental) from the "
             "gates; draflow has one allocator core that takes every gate as a feature flag "
             "(test_featuregates.py::test_explicit_values_win_and_map_like_kube_scheduler)"
       for name in UPSTREAM_CASES if name.startswith("TestAllocatorSelection/")},
    "TestGetPendingAllocation/nil-claim": "n/a: a nil claim pointer in the in-flight map (Go only)",
    **{name: "n/a: compares the scheduler cache's assumed pod with the status it patches; draflow has no "
             "pod cache copy to compare (the status is computed and written in one pipeline)"
       for name in ("TestPatchNodeAllocatableResourceClaimStatus/assumed pod status same as new status",
                    "TestPatchNodeAllocatableResourceClaimStatus/assumed pod status different from new status")},
}

NOT_YET: dict[str, str] = {}


def mapping() -> dict[str, tuple[str, ...] | str]:
    """Upstream name -> the covering refs, or the ``differs: ...`` / ``n/a: ...`` / ``missing: ...`` text."""
    out: dict[str, tuple[str, ...] | str] = dict(COVERED)
    for name, d in DIFFERS.items():
        out[name] = "differs: " + d.why
    for table in (NOT_APPLICABLE, NOT_YET):
        for name, text in table.items():
            out[name] = text
    return out
