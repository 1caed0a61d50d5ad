"""CEL regex functions with the apiserver's semantics (Go ``regexp`` = RE2), not Python's ``re``.

Every expected value below is what Go's ``regexp`` (``FindString`` / ``FindAllString`` /
``Compile``) gives for the same input; they were checked against Go 1.26 with a small Go program.
"""

import subprocess
import sys
import textwrap

import pytest

from structured_allocator.core.cel_env import (
    CelCompileError,
    CelRuntimeError,
    compile_selector,
    device_input,
)
from structured_allocator.core.cel_regex import RegexError, compile_regex, find, find_all

DRIVER = "gpu.example.com"


@pytest.mark.parametrize(
    ("pattern", "text", "first", "every"),
    [
        ("[0-9]+", "a1b22", "1", ["1", "22"]),
        # Go: an empty match right after the previous match is skipped (Python's re keeps it).
        ("a*", "baaac", "", ["", "aaa", ""]),
        ("[0-9]*", "a1b22", "", ["", "1", "22"]),
        # `$` matches only at the very end (Python's re also matches before a final newline).
        ("c$", "abc\n", "", []),
        ("(?m)c$", "abc\n", "c", ["c"]),
        # Leftmost-first, like Perl and Go.
        ("a|ab", "ab", "a", ["a"]),
        # \B between the bytes of a multi-byte character is no match for Go (it steps by character).
        ("\\B", "héllo wörld", "", ["", "", "", ""]),
        ("", "日本", "", ["", "", ""]),
        ("\\pL+", "日本語x 1", "日本語x", ["日本語x"]),
        ("(?i)É", "éÉ", "é", ["é", "É"]),
        ("(a+)+$", "a" * 40 + "!", "", []),
    ],
)
def test_find_and_find_all_follow_go(pattern: str, text: str, first: str, every: list[str]) -> None:
    assert find(text, pattern) == first
    assert find_all(text, pattern) == every
    assert find_all(text, pattern, 1) == every[:1]
    assert find_all(text, pattern, 0) == []


@pytest.mark.parametrize(
    ("pattern", "valid"),
    [
        ("(?P<n>a)", True),
        ("(?<n>a)", True),
        ("\\Q.*\\E", True),
        ("\\Q\\C\\E", True),
        ("\\z", True),
        ("\\123", True),
        ("\\p{Greek}", True),
        ("((a{10}){10}){10}", True),
        ("\\C", False),  # RE2 (C++) accepts it; Go does not
        ("\\Z", False),
        ("(?=a)", False),
        ("(?<!a)b", False),
        ("(a)\\1", False),
        ("a++", False),
        ("a{1001}", False),
        ("(a{100}){100}", False),
        ("[z-a]", False),
        ("\\p{L&}", False),
    ],
)
def test_syntax_is_gos(pattern: str, valid: bool) -> None:
    if valid:
        compile_regex(pattern)
    else:
        with pytest.raises(RegexError, match="error parsing regexp"):
            compile_regex(pattern)


@pytest.mark.parametrize(
    "expression",
    [
        '"x".find("(?=a)") == ""',
        '"x".findAll(r"\\Z", 1) == []',
        '"x".matches("\\\\C")',
        '"x".matches(\'(a)\\\\1\') || true',
    ],
)
def test_invalid_constant_pattern_is_a_compile_error(expression: str) -> None:
    with pytest.raises(CelCompileError, match="pattern"):
        compile_selector(expression)


def test_invalid_pattern_from_an_attribute_is_a_runtime_error() -> None:
    device = device_input(DRIVER, {"name": "d", "attributes": {"re": {"string": "(?=a)"}}})
    sel = compile_selector(f'"abc".find(device.attributes["{DRIVER}"].re) == ""')
    with pytest.raises(CelRuntimeError, match="error parsing regexp"):
        sel.matches(device)


def test_selectors_use_go_semantics() -> None:
    device = device_input(DRIVER, {"name": "d", "attributes": {"s": {"string": "abc\n"}}})
    a = f'device.attributes["{DRIVER}"]'
    assert compile_selector(f'{a}.s.find("c$") == ""').matches(device)
    assert compile_selector('"baaac".findAll("a*") == ["", "aaa", ""]').matches(device)


def test_pathological_pattern_evaluates_promptly() -> None:
    """The issue's expression (backtracking ``re`` needs minutes for it, and hours for 40 "a"s) is
    evaluated in a child process; the timeout is only a liveness bound, far above RE2's microseconds."""
    code = textwrap.dedent(
        """
        from structured_allocator.core.cel_env import compile_selector, device_input
        d = device_input("x", {"name": "d"})
        print(compile_selector('"aaaaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a+)+$") == ""').matches(d),
              compile_selector('"%s!".findAll("(a+)+$") == []').matches(d))
        """
        % ("a" * 40)
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["True", "True"]
