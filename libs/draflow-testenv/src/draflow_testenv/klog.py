"""Read the structured lines a Kubernetes component (the kubelet) writes in klog's text format.

A line is ``I1124 16:00:31.855629   12414 dra_plugin_manager.go:444] "Registered DRA plugin"
logger="DRA registration handler" driverName="gpu.draflow.example" numPlugins=1``:
severity and time, thread id, source file and line, the message as a Go-quoted string, then ``key=value``
pairs whose value is a Go-quoted string, a JSON object or array (``plugin={"SocketPath":...}``) or a bare
token (``1``, ``true``, ``null``). ``records`` returns the lines carrying one message, values decoded (quoted
strings unquoted, everything else kept as its text), so a test can compare fields instead of substrings.
Multi-line values (klog's ``key=<`` ... ``>`` blocks) are kept as their first line's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_HEADER = re.compile(r"^([IWEF])(\d{4} \d{2}:\d{2}:\d{2}\.\d+)\s+\d+\s+([^\]\s]+)\] ")
_KEY = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.\-]*)=")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\", '"': '"', "'": "'"}


@dataclass(frozen=True)
class Record:
    """One structured klog line."""

    severity: str  # I, W, E or F
    time: str  # MMDD hh:mm:ss.uuuuuu as printed
    source: str  # file.go:line
    message: str
    values: dict[str, str] = field(default_factory=dict)


def _go_string(text: str, start: int) -> tuple[str, int]:
    """The Go-quoted string at ``text[start]`` (a ``"``), unquoted, and the index after its closing quote."""
    out: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return "".join(out), i + 1
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        esc = text[i + 1:i + 2]
        if esc in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[esc])
            i += 2
        elif esc in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[esc]
            digits = text[i + 2:i + 2 + width]
            if len(digits) != width:
                raise ValueError(f"truncated \\{esc} escape at {i}")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        elif esc.isdigit():  # \NNN octal
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            raise ValueError(f"unknown escape \\{esc} at {i}")
    raise ValueError("unterminated string")


def _balanced(text: str, start: int) -> int:
    """The index after the JSON object or array opening at ``text[start]``."""
    depth, i, in_string = 0, start, False
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def parse(line: str) -> Record | None:
    """The record of one structured klog line; None for anything else (unstructured or foreign lines)."""
    head = _HEADER.match(line)
    if head is None or line[head.end():head.end() + 1] != '"':
        return None
    try:
        message, i = _go_string(line, head.end())
        values: dict[str, str] = {}
        while i < len(line):
            key = _KEY.match(line, i)
            if key is None:
                break
            i = key.end()
            if line[i:i + 1] == '"':
                values[key.group(1)], i = _go_string(line, i)
            else:
                if line[i:i + 1] in ("{", "["):
                    end = _balanced(line, i)
                else:
                    end = line.find(" ", i)
                    end = len(line) if end < 0 else end
                values[key.group(1)] = line[i:end]
                i = end
    except ValueError:
        return None
    return Record(severity=head.group(1), time=head.group(2), source=head.group(3), message=message,
                  values=values)


def records(path: Path, message: str, **values: str) -> list[Record]:
    """The records of the log at ``path`` whose message is ``message`` and whose values include ``values``."""
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if f'"{message}"' not in line:
            continue
        rec = parse(line)
        if rec is not None and rec.message == message and all(
                rec.values.get(k) == v for k, v in values.items()):
            found.append(rec)
    return found
