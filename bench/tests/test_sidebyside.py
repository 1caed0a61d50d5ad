"""The pure parts of the side-by-side benchmark: the correctness check, scheduler_perf's throughput
formula, the API server request counters, the workload objects, the py-spy profile summary."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from sidebyside import objects
from sidebyside.apiprofile import counters, counters_report, requests_report
from sidebyside.measure import parse_requests, percentile, scheduler_perf_throughput, writes
from sidebyside.pyspy import summary
from sidebyside.verify import verify
from sidebyside.workloads import BY_NAME

POOLS = {objects.pool_name(i): objects.node_name(i) for i in range(3)}


def bound_pod(name: str, node: int | None, claim: str, uid: str = "") -> dict[str, Any]:
    pod = objects.pod(name, "default-scheduler")
    pod["metadata"].update(namespace="test", uid=uid or f"uid-{name}")
    if node is not None:
        pod["spec"]["nodeName"] = objects.node_name(node)
    pod["status"] = {"resourceClaimStatuses": [{"name": "resource", "resourceClaimName": claim}]}
    return pod


def claim(name: str, node: int | None, device: int, reserved: list[str]) -> dict[str, Any]:
    c: dict[str, Any] = {"metadata": {"name": name, "namespace": "test"}, "spec": objects.claim_spec()}
    if node is not None:
        c["status"] = {
            "allocation": objects.allocation(objects.node_name(node), objects.pool_name(node),
                                             [("req-0", f"basic-device-{device}")]),
            "reservedFor": [{"resource": "pods", "name": "x", "uid": u} for u in reserved]}
    return c


def test_verify_accepts_a_correct_placement() -> None:
    pods = [bound_pod("a", 0, "a-c"), bound_pod("b", 1, "b-c")]
    claims = [claim("a-c", 0, 0, ["uid-a"]), claim("b-c", 1, 0, ["uid-b"])]
    v = verify(pods, claims, POOLS, all_bound=True)
    assert v.ok, v.problems
    assert (v.pods, v.bound, v.claims_checked, v.devices_allocated) == (2, 2, 2, 2)


def test_verify_finds_a_device_allocated_twice() -> None:
    pods = [bound_pod("a", 0, "a-c"), bound_pod("b", 0, "b-c")]
    claims = [claim("a-c", 0, 3, ["uid-a"]), claim("b-c", 0, 3, ["uid-b"])]
    v = verify(pods, claims, POOLS, all_bound=True)
    assert v.problems == [f"device {objects.DRIVER}/resourceslice-0/basic-device-3 allocated to test/a-c "
                          "and test/b-c"]


def test_verify_finds_a_claim_allocated_for_another_node() -> None:
    v = verify([bound_pod("a", 1, "a-c")], [claim("a-c", 0, 0, ["uid-a"])], POOLS, all_bound=True)
    assert len(v.problems) == 2  # the node selector and the device's pool both name node 0
    assert "allocated for scheduler-perf-dra-0" in v.problems[0]
    assert "of pool resourceslice-0" in v.problems[1]


def test_verify_finds_a_claim_not_reserved_for_its_pod() -> None:
    v = verify([bound_pod("a", 0, "a-c")], [claim("a-c", 0, 0, ["someone-else"])], POOLS, all_bound=True)
    assert v.problems == ["pod test/a on scheduler-perf-dra-0: claim a-c not reserved for it"]


def test_verify_finds_unallocated_and_missing_claims() -> None:
    pods = [bound_pod("a", 0, "a-c"), bound_pod("b", 0, "gone")]
    v = verify(pods, [claim("a-c", None, 0, [])], POOLS, all_bound=True)
    assert v.problems == ["pod test/a on scheduler-perf-dra-0: claim a-c not allocated",
                          "pod test/b on scheduler-perf-dra-0: claim gone missing"]


def test_verify_counts_an_unbound_pod_only_when_all_must_be_bound() -> None:
    pods = [bound_pod("a", None, "a-c")]
    assert verify(pods, [], POOLS, all_bound=True).problems == ["pod test/a not bound"]
    assert verify(pods, [], POOLS, all_bound=False).ok


def test_verify_reads_named_claims_of_shared_pods() -> None:
    pod = objects.pod("p", "draflow", claim_name="test-claim-0")
    pod["metadata"].update(namespace="test", uid="u1")
    pod["spec"]["nodeName"] = objects.node_name(2)
    v = verify([pod], [claim("test-claim-0", 2, 1, ["u0", "u1"])], POOLS, all_bound=True)
    assert v.ok and v.claims_checked == 1


def test_throughput_as_scheduler_perf_skips_the_first_sample_and_repeats_after_empty_ticks() -> None:
    # t=0 nothing yet; t=1 starts the clock; 10/s; an empty tick; 20 pods over the next 2 s -> 10/s twice
    samples = [(0.0, 0), (1.0, 5), (2.0, 15), (3.0, 15), (4.0, 35)]
    assert scheduler_perf_throughput(samples) == 10.0
    assert scheduler_perf_throughput([(1.0, 2), (2.0, 12), (3.0, 42)]) == 20.0
    assert math.isnan(scheduler_perf_throughput([(1.0, 3)]))


def test_requests_counters_are_summed_by_verb_resource_subresource() -> None:
    page = "\n".join([
        "# TYPE apiserver_request_total counter",
        'apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",'
        'scope="resource",subresource="binding",verb="POST",version="v1"} 7',
        'apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",'
        'scope="resource",subresource="binding",verb="POST",version="v1"} 1',
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",'
        'scope="namespace",subresource="",verb="LIST",version="v1"} 4',
        'apiserver_request_total_other{verb="POST"} 9',
    ])
    after = parse_requests(page)
    assert after[("POST", "pods", "binding")] == 8
    before = parse_requests(page.replace("} 7", "} 2"))
    assert writes(before, after) == {("POST", "pods", "binding"): 5}  # LIST is not a write


def test_percentile_is_nearest_rank() -> None:
    values = [float(i) for i in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99)) == (50.0, 99.0)
    assert math.isnan(percentile([], 0.5))


def test_slices_carry_upstreams_attributes_with_pci_roots_cycling() -> None:
    s = objects.resource_slice(7, devices=10, pci_roots=2)
    assert s["spec"]["nodeName"] == "scheduler-perf-dra-7" and len(s["spec"]["devices"]) == 10
    roots = [d["attributes"][objects.PCI_ROOT]["string"] for d in s["spec"]["devices"][:3]]
    assert roots == ["pci0000:00", "pci0000:01", "pci0000:00"]
    assert s["spec"]["devices"][0]["attributes"]["driverVersion"] == {"version": "1.2.3"}


def test_scaling_keeps_the_steady_state_backlog() -> None:
    steady = BY_NAME["steady"].scaled(0.1)
    assert (steady.nodes, steady.init_claims, steady.measure_pods) == (50, 250, 10)
    assert BY_NAME["template"].scaled(0.1).measure_pods == 250


def test_requests_report_lists_every_request_that_grew_per_placed_pod() -> None:
    before = Counter({("POST", "pods", ""): 10, ("WATCH", "pods", ""): 4, ("GET", "leases", ""): 7})
    after = Counter({("POST", "pods", ""): 110, ("WATCH", "pods", ""): 4, ("GET", "leases", ""): 9,
                     ("PATCH", "resourceclaims", "status"): 50})
    lines = requests_report(before, after, pods=100)
    assert [line.split() for line in lines] == [
        ["POST", "pods", "100", "1.00"],
        ["PATCH", "resourceclaims/status", "50", "0.50"],
        ["GET", "leases", "2", "0.02"],
        ["total", "152", "1.52"],
    ]


def test_requests_report_without_placed_pods_has_no_rates() -> None:
    lines = requests_report(Counter(), Counter({("GET", "", "openapi/v3"): 3}), pods=0)
    assert [line.split() for line in lines] == [["GET", "openapi/v3", "3", "-"], ["total", "3", "-"]]


def test_counters_report_shows_the_series_that_grew_per_placed_pod() -> None:
    page_before = ('# HELP apiserver_watch_events_total Number of events sent in watch clients\n'
                   'apiserver_watch_events_total{group="",kind="Pod",version="v1"} 100\n'
                   'apiserver_watch_events_total{group="resource.k8s.io",kind="ResourceClaim"} 7\n'
                   'apiserver_request_total{verb="GET"} 5\n')
    page_after = ('apiserver_watch_events_total{group="",kind="Pod",version="v1"} 400\n'
                  'apiserver_watch_events_total{group="resource.k8s.io",kind="ResourceClaim"} 7\n'
                  'apiserver_watch_events_sizes_sum{group="",kind="Pod",version="v1"} 2.5e+06\n'
                  'apiserver_request_total{verb="GET"} 9\n')
    before, after = counters(page_before), counters(page_after)
    assert 'apiserver_request_total{verb="GET"}' not in after
    assert counters_report(before, after, pods=100) == [
        'apiserver_watch_events_sizes_sum{group="",kind="Pod",version="v1"}  2500000  25000.00',
        'apiserver_watch_events_total{group="",kind="Pod",version="v1"}  300  3.00',
    ]


def test_table_shows_the_harness_cpu_per_placed_pod_apart_from_the_stacks() -> None:
    from sidebyside.report import table
    from sidebyside.runner import HARNESS, Result

    r = Result("template", "draflow", pods=1000, span=10.0)
    r.cpu = {"claim-controller": 3.0, "structured-allocator": 6.0, HARNESS: 0.8}
    lines = [line for line in table(BY_NAME["template"], [r]).splitlines() if line.startswith("| ")]
    cells = [line.split(" | ") for line in lines if " | " in line]
    rows = {c[0].strip("| "): c[1].strip(" |") for c in cells}
    assert rows["this harness CPU per placed pod (ms): pod creators + bound-pod watch"] == "0.8"
    assert rows["stack CPU per placed pod (ms)"] == "9.0"


def test_a_py_spy_summary_counts_a_function_once_per_sample_and_its_own_samples_at_the_top(
        tmp_path: Path) -> None:
    raw = tmp_path / "p.txt"
    raw.write_text("main (a.py:1);loop (a.py:2);loop (a.py:2);decide (b.py:3) 3\n"
                   "main (a.py:1);loop (a.py:2);write (c.py:4) 1\n"
                   "garbage line\n")
    text = summary(raw)
    cumulative, own = text.split("self:")
    assert text.startswith("4 samples")
    assert "100.0%  loop (a.py:2)" in cumulative  # in both stacks, counted once in the first
    assert " 75.0%  decide (b.py:3)" in cumulative and " 25.0%  write (c.py:4)" in cumulative
    assert " 75.0%  decide (b.py:3)" in own and "loop" not in own
