"""Writes the package's type stub (``__init__.pyi``) from the CLI's own
options, so that editors and type checkers know every keyword argument:

    .venv/bin/python -m linerate._stub > crates/python/python/linerate/__init__.pyi

A test fails when the committed stub differs from what this prints."""

import keyword

from . import _native

COMMANDS = [
    ("trial", "trial"),
    ("rfc2544", "rfc2544"),
    ("mlrsearch", "mlrsearch"),
    ("loss", "loss"),
    ("latency", "latency"),
    ("back_to_back", "back-to-back"),
    ("cpu_target", "cpu-target"),
    ("tcp", "tcp"),
    ("http", "http"),
    ("tunnels", "tunnels"),
]

HEAD = '''# The type stub of the package linerate, generated from the CLI's options
# by `python -m linerate._stub`; do not edit (a test compares it).
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

Progress = Callable[[str, Dict[str, Any]], None]
Value = Union[str, int, float]

class Error(Exception): ...
class BadInput(Error): ...

class ThresholdFailed(Exception):
    result: Optional[Dict[str, Any]]
    def __init__(self, message: str, result: Optional[Dict[str, Any]]) -> None: ...

def command_line(command: str, **options: Any) -> List[str]: ...
def lab_status() -> List[Dict[str, Any]]: ...
'''


def _name(option: str) -> str:
    return option + "_" if keyword.iskeyword(option) else option


def _parameters(command: str) -> str:
    params = []
    for name, kind, _ in _native.options(command):
        name = _name(name)
        if kind == "flag":
            params.append(f"    {name}: bool = False,")
        elif kind == "list":
            params.append(f"    {name}: Optional[Sequence[Value]] = None,")
        else:
            params.append(f"    {name}: Optional[Value] = None,")
    return "\n".join(params)


def _doc(command: str) -> str:
    lines = [f"``linerate {command}``; returns what its --json writes.", "", "Options:"]
    for name, _, help_line in _native.options(command):
        lines.append(f"    {_name(name)}: {help_line}".rstrip())
    body = "\n".join("    " + line if line else "" for line in lines)
    return body.replace('"""', "'''").replace("\\\\", "\\\\\\\\")


def render() -> str:
    out = [HEAD]
    for function, command in COMMANDS:
        out.append(
            f"def {function}(\n    *,\n    progress: Optional[Progress] = None,\n{_parameters(command)}\n"
            f") -> Optional[Dict[str, Any]]:\n    \"\"\"\n{_doc(command)}\n    \"\"\"\n"
        )
    for function, command in [("lab_up", "lab up"), ("lab_down", "lab down")]:
        out.append(
            f"def {function}(\n    *,\n{_parameters(command)}\n) -> None:\n    \"\"\"\n{_doc(command)}\n    \"\"\"\n"
        )
    return "\n".join(out)


if __name__ == "__main__":
    print(render(), end="")
