"""Checks shared by the maps of upstream test cases onto draflow's tests (the claim-controller's
``upstream_map``, kubelet-dra-shim's ``kubelet_map``): every upstream case in exactly one table, and every
draflow test a table names exists."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["absent_tests", "mapping_problems"]

_TEST_REF = re.compile(r"[\w/.-]+\.py::\w+")


def mapping_problems(upstream: Iterable[str], *tables: Iterable[str]) -> list[str]:
    """What is wrong with mapping ``upstream`` case names onto ``tables`` (each case in exactly one of them,
    no name that is not an upstream case); empty when nothing is."""
    cases = list(upstream)
    places = Counter(name for table in tables for name in table)
    missing = [name for name in cases if name not in places]
    twice = sorted(name for name, n in places.items() if n > 1)
    unknown = sorted(set(places) - set(cases))
    problems = []
    if missing:
        problems.append(f"{len(missing)} upstream cases not mapped: {missing}")
    if twice:
        problems.append(f"mapped more than once: {twice}")
    if unknown:
        problems.append(f"mapped names that are not upstream cases: {unknown}")
    return problems


def absent_tests(root: Path, covered: Mapping[str, Iterable[str]], *reasons: Mapping[str, str]) -> list[str]:
    """The ``path.py::test_name`` references (``covered``'s values, and those written in the ``reasons``
    tables' texts) whose file below ``root`` has no such test function, plus a line per covered case that
    names no test."""
    named = {test for tests in covered.values() for test in tests}
    named |= {ref for table in reasons for reason in table.values() for ref in _TEST_REF.findall(reason)}
    absent = []
    for ref in sorted(named):
        path, _, function = ref.partition("::")
        file = root / path
        if not file.is_file() or not re.search(rf"^(async )?def {function}\(", file.read_text(), re.M):
            absent.append(ref)
    absent += [f"{case}: names no test" for case, tests in covered.items() if not list(tests)]
    return absent
