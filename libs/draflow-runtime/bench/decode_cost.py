"""Decode cost of a ~1 MB ResourceSliceList: orjson into dicts vs the official client's models.

Run: ``.venv/bin/python libs/draflow-runtime/bench/decode_cost.py [--slices 50] [--devices 32] [--rounds 7]``
Prints the payload size and the median/min milliseconds of each path.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson
from kubernetes.aio.client import ApiClient, Configuration


def device(slice_index: int, index: int) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "driver.example.com/model": {"string": "LATEST-GPU-MODEL"},
            "driver.example.com/uuid": {"string": f"gpu-{slice_index:04d}-{index:04d}-0b5e-4e2f-9d1c"},
            "driver.example.com/index": {"int": index},
            "driver.example.com/driverVersion": {"version": "1.2.3"},
            "driver.example.com/productName": {"string": "Example Accelerator 80GB HBM3"},
            "driver.example.com/mig": {"bool": False},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{index % 4:02x}"},
        },
        "capacity": {
            "driver.example.com/memory": {"value": "80Gi"},
            "driver.example.com/multiprocessors": {"value": "132"},
            "driver.example.com/copyEngines": {"value": "7"},
            "driver.example.com/decoders": {"value": "7"},
            "driver.example.com/encoders": {"value": "0"},
        },
    }


def slice_list(slices: int, devices: int) -> dict[str, Any]:
    items = []
    for s in range(slices):
        items.append({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {
                "name": f"node-{s:04d}-driver.example.com-abcde",
                "uid": f"6f1c2a8e-0000-4000-8000-{s:012d}",
                "resourceVersion": str(1000 + s),
                "generation": 1,
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "generateName": f"node-{s:04d}-driver.example.com-",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": f"node-{s:04d}",
                                     "uid": f"0a0a0a0a-0000-4000-8000-{s:012d}", "controller": True}],
            },
            "spec": {
                "driver": "driver.example.com",
                "nodeName": f"node-{s:04d}",
                "pool": {"name": f"node-{s:04d}", "generation": 1, "resourceSliceCount": 1},
                "devices": [device(s, d) for d in range(devices)],
            },
        })
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList",
            "metadata": {"resourceVersion": "2000"}, "items": items}


def timed(fn: Callable[[], Any], rounds: int) -> tuple[float, float]:
    fn()  # warm-up
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=50)
    parser.add_argument("--devices", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    payload = orjson.dumps(slice_list(args.slices, args.devices))
    text = payload.decode()
    api = ApiClient(Configuration())

    def models() -> Any:
        return api.deserialize(text, "V1ResourceSliceList", "application/json")

    decoded = models()
    assert len(decoded.items) == args.slices and len(decoded.items[0].spec.devices) == args.devices
    print(f"payload: {len(payload) / 1e6:.2f} MB, {args.slices} slices x {args.devices} devices")
    for label, fn in [
        ("orjson.loads -> dict", lambda: orjson.loads(payload)),
        ("json.loads -> dict", lambda: json.loads(text)),
        ("ApiClient.deserialize -> V1ResourceSliceList", models),
    ]:
        median, best = timed(fn, args.rounds)
        print(f"{label:<46} median {median:8.1f} ms   min {best:8.1f} ms")


if __name__ == "__main__":
    main()
