"""Regular expressions for CEL selectors with the apiserver's semantics: RE2, as Go's ``regexp``.

The apiserver validates and evaluates selectors with Go's ``regexp`` package, an RE2 implementation:
matching takes time linear in the input, whatever the pattern. Python's backtracking ``re`` does not
(``"aaaaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a+)+$")`` takes minutes in ``re``) and accepts a different
syntax (look-around, back-references, ``\\Z``), so the Kubernetes ``find`` / ``findAll`` functions run
on RE2 here (``google-re2``; cel-cpp's built-in ``matches`` already uses RE2).

Where RE2 (C++) and Go's ``regexp`` differ:

* ``\\C`` (any byte) is RE2-only; Go rejects it, so :func:`compile_regex` rejects it too.
* ``findAll`` follows Go's ``FindAllString``: an empty match right after the previous match is
  skipped and the search moves on by one character (Python's ``finditer`` keeps such matches).

Patterns are UTF-8 (RE2's default, like Go); the input is encoded once per call and matched as bytes,
so positions never need converting back and forth. Leftmost-first matching, ``$`` only at the end of
the text unless ``(?m)`` (Python's ``$`` also matches before a final newline) — both as in Go.

:func:`literal_patterns` finds the constant patterns of ``matches``/``find``/``findAll`` calls in an
expression, so that an invalid one is a compile error, as upstream (``ValidateRegexLiterals`` for
``matches``, the regex optimisation of the Kubernetes library for ``find``/``findAll``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import re2
from re2 import _re2

__all__ = ["RegexError", "compile_regex", "find", "find_all", "iter_matches", "literal_patterns"]

_CACHE_MAX = 256


class RegexError(ValueError):
    """The pattern is not a valid Go/RE2 regular expression."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would write every bad pattern to stderr
    return options


_OPTIONS = _options()
_UNANCHORED = _re2.RE2.Anchor.UNANCHORED
_CACHE: dict[str, Any] = {}  # pattern -> compiled RE2 object or RegexError


def _go_only_rejects(pattern: str) -> str | None:
    """Syntax RE2 accepts and Go's ``regexp`` rejects: ``\\C`` outside ``\\Q...\\E``."""
    i, n = 0, len(pattern)
    while i < n - 1:
        if pattern[i] != "\\":
            i += 1
            continue
        nxt = pattern[i + 1]
        if nxt == "Q":
            end = pattern.find("\\E", i + 2)
            if end < 0:
                return None
            i = end + 2
            continue
        if nxt == "C":
            return "invalid escape sequence: `\\C`"
        i += 2
    return None


def compile_regex(pattern: str) -> Any:
    """The compiled RE2 regex for ``pattern`` (cached); :class:`RegexError` if Go would reject it.

    The object is google-re2's C++ binding (``re2._re2.RE2``), whose ``Match`` is called directly:
    the module's ``re``-like wrapper costs four times as much per match (a generator and a match object
    each time), which is what a long ``findAll`` spends its time on."""
    entry = _CACHE.get(pattern)
    if entry is None:
        problem = _go_only_rejects(pattern)
        if problem is None:
            entry = _re2.RE2(pattern.encode("utf-8"), _OPTIONS)
            if not entry.ok():
                problem = entry.error()
                if isinstance(problem, bytes):
                    problem = problem.decode("utf-8", "replace")
        if problem is not None:
            entry = RegexError(f"error parsing regexp: {problem}")
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[pattern] = entry
    if isinstance(entry, RegexError):
        raise entry
    return entry


def _is_continuation(byte: int) -> bool:
    return 0x80 <= byte < 0xC0


def _matches(regex: Any, data: bytes) -> Iterator[tuple[int, int]]:
    """Go's successive non-overlapping matches: (start, end) byte offsets.

    RE2 searches byte by byte, so an empty match (``\\B``, ``x*``) can fall inside a multi-byte
    character, where Go, which steps by character, never looks: such a match is skipped."""
    pos, prev_end, end = 0, -1, len(data)
    while pos <= end:
        start, stop = regex.Match(_UNANCHORED, data, pos, end)[0]
        if start < 0:
            return
        if start == stop and start < end and _is_continuation(data[start]):
            pos = start + 1
            while pos < end and _is_continuation(data[pos]):
                pos += 1
            continue
        accept = True
        if stop == pos:  # empty match: not right after the previous match; step one character on
            accept = start != prev_end
            pos += 1
            while pos < end and _is_continuation(data[pos]):
                pos += 1
        else:
            pos = stop
        prev_end = stop
        if accept:
            yield start, stop


def iter_matches(text: str, pattern: str) -> Iterator[str]:
    """The matches of ``pattern`` in ``text``, one at a time, as Go's ``FindAllString`` finds them."""
    regex = compile_regex(pattern)
    data = text.encode("utf-8")
    for start, stop in _matches(regex, data):
        yield data[start:stop].decode("utf-8")


def find(text: str, pattern: str) -> str:
    """Kubernetes CEL ``<string>.find(<pattern>)``: the leftmost match, or ``""``."""
    return next(iter_matches(text, pattern), "")


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Kubernetes CEL ``<string>.findAll(<pattern>[, <limit>])``: at most ``limit`` matches (all if
    negative, none if zero), as Go's ``FindAllString``."""
    out: list[str] = []
    if limit == 0:
        compile_regex(pattern)
        return out
    for match in iter_matches(text, pattern):
        out.append(match)
        if len(out) == limit:
            break
    return out


# -- constant patterns in an expression --------------------------------------------------------------

_REGEX_FUNCTIONS = frozenset({"matches", "find", "findAll"})


def _string_end(expression: str, i: int, raw: bool) -> int:
    """End (exclusive) of the string literal whose opening quote is at ``i``."""
    n = len(expression)
    triple = expression[i : i + 3] in ('"""', "'''")
    quote = expression[i : i + 3] if triple else expression[i]
    j = i + len(quote)
    while j < n and expression[j : j + len(quote)] != quote:
        j += 2 if expression[j] == "\\" and not raw else 1
    return min(n, j + len(quote))


def _prefix(expression: str, i: int) -> str | None:
    """The string prefix (``r``, ``b``, ``rb``, ... possibly empty) starting at ``i``, if a quote follows."""
    for size in (0, 1, 2):
        head = expression[i : i + size]
        if expression[i + size : i + size + 1] in ("\"", "'") and all(c in "rRbB" for c in head):
            return head
    return None


def _tokens(expression: str) -> Iterator[tuple[str, str]]:
    """(kind, text): ``str`` / ``bytes`` (a whole literal with its prefix), ``id`` or ``op``."""
    i, n = 0, len(expression)
    while i < n:
        c = expression[i]
        prefix = _prefix(expression, i)
        if prefix is not None:
            end = _string_end(expression, i + len(prefix), raw="r" in prefix.lower())
            yield ("bytes" if "b" in prefix.lower() else "str"), expression[i:end]
            i = end
        elif c.isalnum() or c == "_":
            j = i
            while j < n and (expression[j].isalnum() or expression[j] == "_"):
                j += 1
            yield "id", expression[i:j]
            i = j
        elif c.isspace():
            i += 1
        else:
            yield "op", c
            i += 1


def literal_patterns(expression: str) -> list[tuple[str, str]]:
    """(function, literal source text) for each ``.matches/.find/.findAll(<string literal>, ...)``
    call in ``expression`` (member calls; the literal is still in CEL source form)."""
    toks = list(_tokens(expression))
    out: list[tuple[str, str]] = []
    for k in range(len(toks) - 4):
        dot, name, paren, lit, after = toks[k : k + 5]
        if (dot == ("op", ".") and name[0] == "id" and name[1] in _REGEX_FUNCTIONS
                and paren == ("op", "(") and lit[0] == "str" and after in (("op", ")"), ("op", ","))):
            out.append((name[1], lit[1]))
    return out
