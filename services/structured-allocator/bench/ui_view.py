"""Micro-benchmark: CPU time of one web-view document (``ui.view.grid`` + JSON), what ``GET
/ui/state.json`` costs the allocator per rebuild.

Run: ``.venv/bin/python services/structured-allocator/bench/ui_view.py [nodes ...]`` (default 100 1000).
Per node one slice of 8 GPUs in the partitionable shape (a whole device and 4 partitions sharing one
counter set each, 40 devices) and 5 claims holding a whole GPU each; the slice cache is kept across
builds, as the server keeps it; CPU time (``time.process_time``), best of 5, so a busy machine
distorts it less than wall time.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from structured_allocator.ui.prepared import SliceCache
from structured_allocator.ui.view import Claims, grid

DRIVER = "gpu.example.com"


def cluster(nodes: int, gpus: int = 8, parts: int = 4) -> tuple[list[Any], list[Any], list[Any]]:
    slices, node_objs, claims = [], [], []
    for i in range(nodes):
        node = f"sim-{i}"
        devices = []
        for g in range(gpus):
            uses = [{"counterSet": f"gpu-{g}-counters", "counters": {"memory": {"value": "1Gi"}}}]
            devices.append({"name": f"gpu-{g}", "consumesCounters": uses})
            devices += [{"name": f"gpu-{g}-part-{p}", "consumesCounters": uses} for p in range(parts)]
        slices.append({"metadata": {"name": node, "resourceVersion": "1"},
                       "spec": {"driver": DRIVER, "nodeName": node, "devices": devices,
                                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}})
        node_objs.append({"metadata": {"name": node}, "status": {"conditions": [
            {"type": "Ready", "status": "True"}]}})
        for g in range(5):
            claims.append({"metadata": {"name": f"c-{i}-{g}", "namespace": "ns"}, "status": {"allocation": {
                "devices": {"results": [{"driver": DRIVER, "pool": node, "device": f"gpu-{g}"}]}}}})
    return slices, node_objs, claims


def main(sizes: list[int]) -> None:
    for nodes in sizes:
        slices, node_objs, claims = cluster(nodes)
        cache = SliceCache()
        best, size = float("inf"), 0
        for _ in range(5):
            t0 = time.process_time()
            body = json.dumps(grid(slices, Claims.build(claims), node_objs, [], [], cache=cache),
                              separators=(",", ":")).encode()
            best, size = min(best, time.process_time() - t0), len(body)
        print(f"{nodes} nodes, {nodes * 40} devices, {len(claims)} claims: {best * 1000:.1f} ms CPU "
              f"per document, {size} bytes")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100, 1000])
