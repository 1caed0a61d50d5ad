"""The checks shared by the upstream-test maps find what they are for."""

from __future__ import annotations

from pathlib import Path

from draflow_testenv.upstreammap import absent_tests, mapping_problems


def test_a_complete_mapping_has_no_problems() -> None:
    assert mapping_problems(["A/x", "B"], {"A/x": ["t.py::test_x"]}, {"B": "n/a: Go"}) == []


def test_missing_twice_and_unknown_cases_are_each_named() -> None:
    problems = mapping_problems(["A", "B", "C"], {"A": [], "Z": []}, {"A": "differs: y"})
    assert problems == ["2 upstream cases not mapped: ['B', 'C']",
                        "mapped more than once: ['A']", "mapped names that are not upstream cases: ['Z']"]


def test_absent_tests_are_the_references_without_a_test_function(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("def test_here():\n    pass\n\nasync def test_async():\n    pass\n")
    covered = {"A": ["t.py::test_here", "t.py::test_async"], "B": ["t.py::test_gone"], "C": []}
    reasons = {"D": "differs: see u.py::test_missing_file"}
    assert absent_tests(tmp_path, covered, reasons) == ["t.py::test_gone", "u.py::test_missing_file",
                                                        "C: names no test"]
