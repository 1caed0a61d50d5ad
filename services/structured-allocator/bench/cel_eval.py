"""Micro-benchmark: µs per CEL selector evaluation in the DRA environment (cel-expr-python).

Run: ``.venv/bin/python services/structured-allocator/bench/cel_eval.py [iterations]``.
Measures raw ``CompiledSelector.matches`` (no memo) for typical selectors, the cost of building the
device input once per device, and a memoised lookup (what the allocator pays after the first pod).
"""

from __future__ import annotations

import sys
import time

from structured_allocator.core.cel_env import compile_selector, device_input
from structured_allocator.core.pools import PreparedDevice
from structured_allocator.core.selection import evaluate

DRIVER = "gpu.example.com"
RAW = {
    "name": "gpu-0",
    "attributes": {
        "model": {"string": "a100"},
        "numa": {"int": 1},
        "driverVersion": {"version": "1.11.0"},
        "topo.example.com/socket": {"int": 0},
    },
    "capacity": {"memory": {"value": "80Gi"}, "cores": {"value": "108"}},
}
SELECTORS = {
    "driver ==": f'device.driver == "{DRIVER}"',
    "string attr": f'device.attributes["{DRIVER}"].model == "a100"',
    "quantity compareTo": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',
    "semver isGreaterThan": f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.10.0"))',
    "unknown domain (retry)": '!("x" in device.attributes["other.example"])',
    "cel.bind 2 attrs": f'cel.bind(a, device.attributes["{DRIVER}"], a.model == "a100" && a.numa == 1)',
}


def per_call_us(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    data = device_input(DRIVER, RAW)
    print(f"{'case':<28} µs/eval   ({n} iterations)")
    for name, expression in SELECTORS.items():
        sel = compile_selector(expression)
        print(f"{name:<28} {per_call_us(lambda s=sel: s.matches(data), n):7.2f}")
    print(f"{'device_input (per device)':<28} {per_call_us(lambda: device_input(DRIVER, RAW), n):7.2f}")
    start = time.perf_counter()
    for i in range(200):
        compile_selector(f'device.attributes["{DRIVER}"].numa == {i}')
    print(f"{'compile (per expression)':<28} {(time.perf_counter() - start) / 200 * 1e6:7.2f}")
    device = PreparedDevice(DRIVER, "pool", RAW)
    sel = compile_selector(SELECTORS["quantity compareTo"])
    print(f"{'memoised lookup':<28} {per_call_us(lambda: evaluate(sel, device), n):7.2f}")


if __name__ == "__main__":
    main()
