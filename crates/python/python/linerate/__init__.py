"""linerate from Python.

Each function runs the linerate command of the same name in this process,
with the same code as the ``linerate`` binary: keyword arguments are the
command's long options in snake_case (``frame_size=128`` is
``--frame-size 128``; ``True`` is a flag given, ``False`` or ``None`` one left
out; a list repeats the option, as ``sizes=[64, 1518]``). What a function
returns is what the command's ``--json`` file holds (``schema/run.schema.json``):
a dict with the same keys.

    import linerate
    result = linerate.rfc2544(lab=True, sizes=[64, 1518], trial_duration="1s")
    for size in result["results"]:
        print(size["frame_size"], size["throughput_fps"])

Errors: bad input or environment raises :class:`Error` with the CLI's
one-line message (what is wrong and how to fix it), bad input (the options
or their values) as its subclass :class:`BadInput`; a test whose threshold
failed (the CLI's exit code 1) raises :class:`ThresholdFailed`, which carries
the result. Ctrl-C stops the running trial, keeps what was measured (in the
results database, as the CLI does), removes a lab built for the call, and
raises ``KeyboardInterrupt``.

Progress: pass ``progress=callback``; it is called as
``callback(event, fields)`` for each event of the run (``trial_started``,
``trial_done`` with the trial's result, and for rfc2544 and trial also
``run_started``, ``result`` and ``run_done``), the objects ``--events``
writes. A callback that raises stops the run and its exception propagates.

Every function's docstring is the CLI's help of its command. Calls may run
at once from several threads, each with its own progress callback and
quiet setting, on different ports or labs: a run locks its tester ports
and its lab, and a second run on them raises ``linerate.Error``.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional

from . import _native

__all__ = [
    "Error",
    "BadInput",
    "ThresholdFailed",
    "trial",
    "rfc2544",
    "mlrsearch",
    "loss",
    "latency",
    "back_to_back",
    "cpu_target",
    "tcp",
    "http",
    "tunnels",
    "lab_up",
    "lab_down",
    "lab_status",
    "command_line",
]

Error = _native.LinerateError
"""Bad input or environment (the CLI's exit code 2); the message says what to fix."""

BadInput = _native.LinerateBadInput
"""An :class:`Error` whose fix is in the call: an option or its value."""

Progress = Callable[[str, Dict[str, Any]], None]


class ThresholdFailed(Exception):
    """The test ran, and a threshold it was given failed (the CLI's exit code 1).

    ``result`` holds what the test measured, as its ``--json`` file does.
    """

    def __init__(self, message: str, result: Optional[Dict[str, Any]]):
        super().__init__(message)
        self.result = result


def command_line(command: str, **options: Any) -> List[str]:
    """The linerate command line a call stands for, e.g.
    ``command_line("trial", lab=True, frame_size=128)`` is
    ``["trial", "--lab", "--frame-size", "128"]``."""
    argv = command.split()
    for key, value in options.items():
        if value is None or value is False:
            continue
        # A trailing underscore makes a Python keyword usable (from_=...).
        flag = "--" + key.rstrip("_").replace("_", "-")
        if value is True:
            argv.append(flag)
        else:
            for item in value if isinstance(value, (list, tuple)) else [value]:
                item = str(item)
                # A value that starts with "-" (duration=-1) is the
                # option's, not an option of its own.
                argv += [f"{flag}={item}"] if item.startswith("-") else [flag, item]
    return argv


def _run(command: str, progress: Optional[Progress], options: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Runs a command that writes ``--json``; returns what it wrote."""
    callback = None
    if progress is not None:

        def callback(name: str, fields: str) -> None:
            progress(name, json.loads(fields))

    given = options.get("json")
    with tempfile.TemporaryDirectory(prefix="linerate-py-") as private:
        path = given if given else os.path.join(private, "result.json")
        options = dict(options, json=path)
        code, why = _native.run(command_line(command, **options), callback)
        result = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                result = json.load(f)
    if code == 1:
        raise ThresholdFailed(why, result)
    return result


def _command(command: str, name: str):
    def run(*, progress: Optional[Progress] = None, **options: Any) -> Optional[Dict[str, Any]]:
        return _run(command, progress, options)

    run.__name__ = name
    run.__qualname__ = name
    run.__doc__ = (
        f"``linerate {command}``, with its options as keyword arguments; returns "
        f"what its --json writes.\n\n" + _native.help(command)
    )
    return run


trial = _command("trial", "trial")
rfc2544 = _command("rfc2544", "rfc2544")
mlrsearch = _command("mlrsearch", "mlrsearch")
loss = _command("loss", "loss")
latency = _command("latency", "latency")
back_to_back = _command("back-to-back", "back_to_back")
cpu_target = _command("cpu-target", "cpu_target")
tcp = _command("tcp", "tcp")
http = _command("http", "http")
tunnels = _command("tunnels", "tunnels")


def _plain(command: str, options: Dict[str, Any]) -> None:
    code, why = _native.run(command_line(command, **options), None)
    if code == 1:
        raise ThresholdFailed(why, None)


def lab_up(**options: Any) -> None:
    """``linerate lab up``: builds a lab and leaves it up for later runs
    (``lab=True`` uses it). Options as for the CLI, e.g. ``lab_name="a"``."""
    _plain("lab up", options)


def lab_down(**options: Any) -> None:
    """``linerate lab down``: removes a lab (``lab_name="a"``), or every lab
    on this machine (``all=True``)."""
    _plain("lab down", options)


def lab_status() -> List[Dict[str, Any]]:
    """The labs present, as ``linerate lab status --json`` prints them."""
    return json.loads(_native.lab_status())
