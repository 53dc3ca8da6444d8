"""The Python package against the lab: the same runs as the CLI, the same
JSON, errors as exceptions, progress as a callback, Ctrl-C as
KeyboardInterrupt."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback

import pytest

import linerate
from conftest import BINARY, lab_namespaces, namespaces_of


def test_keyword_arguments_are_the_cli_options():
    assert linerate.command_line(
        "rfc2544", lab=True, sizes=[64, 1518], trial_duration="1s", no_db=False, resolution=None
    ) == ["rfc2544", "--lab", "--sizes", "64", "--sizes", "1518", "--trial-duration", "1s"]
    assert linerate.command_line("lab down", lab_name="x") == ["lab", "down", "--lab-name", "x"]


def test_docstrings_are_the_cli_help():
    assert "--trial-duration" in linerate.rfc2544.__doc__
    assert "--exceed-ratio" in linerate.mlrsearch.__doc__
    assert linerate.back_to_back.__name__ == "back_to_back"


def test_bad_input_raises_the_cli_one_line_error(no_leftovers):
    with pytest.raises(linerate.Error) as e:
        linerate.trial(lab=True, frame_size=20, rate="1000fps", no_db=True)
    assert "frame size 20" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(linerate.Error) as e:
        linerate.trial(lab=True, rate="1000fps", no_such_option=1)
    assert "unexpected keyword argument 'no_such_option'" in str(e.value)


def test_bad_input_is_told_from_the_environment(no_leftovers):
    with pytest.raises(linerate.BadInput, match="frame size 20"):
        linerate.trial(lab=True, frame_size=20, rate="1000fps", no_db=True)
    with pytest.raises(linerate.BadInput, match="no_such_option"):
        linerate.trial(lab=True, rate="1000fps", no_such_option=1)
    assert issubclass(linerate.BadInput, linerate.Error)
    # A missing interface is the machine's: an Error, not BadInput.
    with pytest.raises(linerate.Error, match="interface 'nosuch0' not found") as e:
        linerate.trial(
            port_a="nosuch0", port_b="nosuch1",
            ip_a="198.18.0.2/24", gw_a="198.18.0.1", ip_b="198.19.0.2/24", gw_b="198.19.0.1",
            frame_size=64, rate="1000fps", no_db=True,
        )
    assert not isinstance(e.value, linerate.BadInput)


def test_errors_name_the_python_keywords(no_leftovers):
    # The CLI says "--sizes: frame size 20 ..." (frame_size's option).
    with pytest.raises(linerate.BadInput) as e:
        linerate.trial(lab=True, frame_size=20, rate="1000fps", no_db=True)
    assert str(e.value).startswith("frame_size=20: frame size 20"), str(e.value)
    assert "--" not in str(e.value)
    with pytest.raises(linerate.BadInput) as e:
        linerate.rfc2544(lab=True, sizes=[64, 20], trial_duration="1s", no_db=True)
    assert str(e.value).startswith("sizes=[64, 20]:"), str(e.value)


@pytest.mark.parametrize(
    "command, keyword, value, says",
    [
        ("trial", "duration", -1, "is negative"),
        ("trial", "duration", "-5s", "is negative"),
        ("trial", "duration", 0, "too short"),
        ("rfc2544", "trial_duration", -1, "is negative"),
        ("rfc2544", "trial_duration", 0, "too short"),
        ("trial", "straggler_wait", "-1s", "is negative"),
    ],
)
def test_negative_and_zero_durations_are_one_line_bad_input(no_leftovers, command, keyword, value, says):
    options = dict(lab=True, no_db=True, **{keyword: value})
    if command == "trial":
        options.update(frame_size=64, rate="1000fps")
    with pytest.raises(linerate.BadInput) as e:
        getattr(linerate, command)(**options)
    message = str(e.value)
    assert message.startswith(f"{keyword}='{value}' ") and says in message, message
    assert "\n" not in message and "unexpected" not in message and "--" not in message, message


def test_a_value_starting_with_a_dash_stays_the_option_s():
    assert linerate.command_line("trial", duration=-1, sizes=[64, "-2"]) == [
        "trial", "--duration=-1", "--sizes", "64", "--sizes=-2",
    ]


def test_trial_returns_what_the_cli_json_holds(no_leftovers, tmp_path):
    options = dict(lab=True, frame_size=128, rate="20000fps", duration="2s", no_db=True, quiet=True)
    events = []
    result = linerate.trial(progress=lambda name, fields: events.append((name, fields)), **options)
    assert result["frame_size"] == 128
    assert result["intended_frames"] == 40000
    assert result["tx_frames"] == 40000
    assert 0 < result["rx_frames"] <= result["tx_frames"]
    # The progress callback heard the trial start and end, with its result.
    names = [name for name, _ in events]
    assert names.index("trial_started") < names.index("trial_done")
    done = dict(events)["trial_done"]
    assert done["result"]["tx_frames"] == result["tx_frames"]
    # The CLI's --json file of the same trial has the same keys.
    cli_json = tmp_path / "cli.json"
    argv = [str(BINARY)] + linerate.command_line("trial", json=str(cli_json), **options)
    subprocess.run(argv, check=True, capture_output=True)
    assert sorted(json.loads(cli_json.read_text())) == sorted(result)


def test_rfc2544_gives_the_table_per_frame_size(no_leftovers):
    seen = []
    report = linerate.rfc2544(
        lab=True, sizes=[64, 1518], trial_duration="1s", resolution="5%", no_db=True, quiet=True,
        progress=lambda name, fields: seen.append(name),
    )
    assert [r["frame_size"] for r in report["results"]] == [64, 1518]
    for r in report["results"]:
        assert 0 < r["throughput_fps"] <= r["line_rate_fps"]
        assert r["throughput_mbps_l2"] > 0
    trials = sum(len(r["trials"]) for r in report["results"])
    assert seen.count("trial_done") == trials


def test_a_failed_threshold_raises_with_the_result(no_leftovers):
    # At line rate the tester cannot even offer 64-byte frames: loss > 0 %.
    with pytest.raises(linerate.ThresholdFailed) as e:
        linerate.trial(lab=True, frame_size=64, rate="100%", duration="1s", no_db=True, quiet=True)
    assert "exceeds the allowed" in str(e.value)
    assert e.value.result["loss_ratio"] > 0


@pytest.fixture
def python_handles_ctrl_c():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test. A shell
    starts a background job (`cmd &` without job control, as a CI script
    often runs) with SIGINT ignored, and Python then leaves it ignored: the
    SIGINT these tests send would do nothing, the run would go on to its
    end, rightly (the process ignores Ctrl-C), and the test would fail."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def raised_by_the_call(error):
    """Whether `error` came out of the native call itself (the innermost
    frame is the package's `_run`, which makes it), unchained: a Ctrl-C
    the call left pending would be raised later, wherever the interpreter
    next looks (in `_run`'s cleanup, on top of the run's own error)."""
    innermost = traceback.extract_tb(error.__traceback__)[-1]
    return innermost.name == "_run" and error.__context__ is None


def test_ctrl_c_stops_the_run_removes_its_lab_and_raises(no_leftovers, python_handles_ctrl_c):
    timer = threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            linerate.trial(lab=True, frame_size=128, rate="10000fps", duration="60s", no_db=True, quiet=True)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 30, "the trial did not stop at Ctrl-C"


@pytest.mark.parametrize("moment", [0.2, 0.5, 1.0, 2.5])
def test_ctrl_c_at_any_moment_raises_from_the_call(no_leftovers, python_handles_ctrl_c, moment):
    # While the lab is built for the run (0.2-1 s here, ~1.5 s in all) and
    # while the trial runs: the lab goes, the call raises.
    timer = threading.Timer(moment, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            linerate.trial(lab=True, frame_size=128, rate="10000fps", duration="60s", no_db=True, quiet=True)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 30, "the trial did not stop at Ctrl-C"
    assert raised_by_the_call(e.value), traceback.format_exception(e.value)


def test_ctrl_c_while_the_lab_builds_stops_the_build_at_once(no_leftovers, python_handles_ctrl_c):
    # Ctrl-C as the run's lab appears (its first namespace): the build stops
    # at its next step and removes what it made. It used to finish the
    # build and open the engine first, about 1.7 s more here.
    pid, sent = os.getpid(), []

    def ctrl_c_once_the_lab_appears():
        deadline = time.monotonic() + 20
        while not namespaces_of(pid) and time.monotonic() < deadline:
            time.sleep(0.001)
        sent.append(time.monotonic())
        os.kill(pid, signal.SIGINT)

    asker = threading.Thread(target=ctrl_c_once_the_lab_appears)
    started = time.monotonic()
    asker.start()
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            linerate.trial(lab=True, frame_size=128, rate="10000fps", duration="60s", no_db=True, quiet=True)
        stopped = time.monotonic()
    finally:
        asker.join()
    assert sent, "no lab of this run appeared"
    print(f"Ctrl-C {sent[0] - started:.3f} s into the call, raised {stopped - sent[0]:.3f} s later")
    # Python looks for Ctrl-C every 0.1 s; a step and the removal take less.
    assert stopped - sent[0] < 0.6, f"the call raised {stopped - sent[0]:.2f} s after Ctrl-C"
    assert raised_by_the_call(e.value), traceback.format_exception(e.value)


# A terminal's Ctrl-C goes to the whole process group: the lab's commands
# (ip, nft) die of it too, and the run, failing, ends by itself at once,
# often before the call has looked for Ctrl-C. The Ctrl-C is sent while
# such a command runs; a namespace half-made by a killed `ip netns add`
# must go with the rest of the lab.
TERMINAL_CTRL_C = r"""
import json, os, signal, threading, time, traceback
import linerate

signal.signal(signal.SIGINT, signal.default_int_handler)

def children():
    found = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                found += f.read().split()
        except OSError:
            pass
    return found

hit = []
def ctrl_c_while_a_command_runs():
    deadline = time.monotonic() + 20
    while not children() and time.monotonic() < deadline:
        time.sleep(0.0005)
    hit.append(bool(children()))
    os.killpg(0, signal.SIGINT)

threading.Thread(target=ctrl_c_while_a_command_runs).start()
try:
    linerate.trial(lab=True, frame_size=128, rate="10000fps", duration="60s", no_db=True, quiet=True)
    out = {"raised": None}
except BaseException as e:
    innermost = traceback.extract_tb(e.__traceback__)[-1]
    out = {
        "raised": type(e).__name__,
        "where": innermost.name,
        "context": repr(e.__context__) if e.__context__ else None,
    }
out["hit_a_command"] = hit[0]
print(json.dumps(out))
"""


def test_terminal_ctrl_c_that_kills_a_lab_command_raises_from_the_call(root):
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", TERMINAL_CTRL_C], start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert not namespaces_of(child.pid), "the run left its lab behind"
        seen = json.loads(out)
        assert seen["hit_a_command"], "no lab command was seen running to send Ctrl-C to"
        assert seen["raised"] == "KeyboardInterrupt", (seen, err)
        assert (seen["where"], seen["context"]) == ("_run", None), seen


def test_a_callback_that_raises_stops_the_run(no_leftovers):
    def stop_at_first_trial(name, fields):
        if name == "trial_started":
            raise RuntimeError("enough")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="enough"):
        linerate.trial(
            lab=True, frame_size=128, rate="10000fps", duration="60s", no_db=True, quiet=True,
            progress=stop_at_first_trial,
        )
    assert time.monotonic() - started < 30


def test_lab_up_status_down(no_leftovers):
    name = f"py{os.getpid()}"
    linerate.lab_up(lab_name=name)
    try:
        assert name in [lab["name"] for lab in linerate.lab_status()]
        assert any(ns.startswith(f"lr-{name}-") for ns in lab_namespaces())
    finally:
        linerate.lab_down(lab_name=name)
    assert name not in [lab["name"] for lab in linerate.lab_status()]


def test_each_call_captures_to_its_own_pcap(no_leftovers, tmp_path):
    # The capture belongs to the run: a second call in the same process
    # writes its own file (it was once installed for the process's life).
    for name in ["first.pcap", "second.pcap"]:
        pcap = tmp_path / name
        linerate.trial(
            lab=True, engine="af_packet", frame_size=128, rate="1000fps", duration="1s",
            pcap=str(pcap), pcap_frames=5, no_db=True, quiet=True,
        )
        size = pcap.stat().st_size
        # The pcap header (24 bytes) and the first 5 frames port B got, each
        # with a 16-byte record header: test frames of 124 bytes as received
        # (no FCS), or an ARP frame among them.
        assert 24 + 5 * (16 + 42) <= size <= 24 + 5 * (16 + 124), f"{name}: {size} bytes"


def test_a_stored_run_keeps_the_command_line_it_stands_for(no_leftovers, tmp_path):
    import sqlite3

    db = tmp_path / "runs.db"
    linerate.trial(lab=True, frame_size=128, rate="1000fps", duration="1s", db=str(db), quiet=True)
    with sqlite3.connect(db) as c:
        command, args, status = c.execute("SELECT command, args_json, status FROM runs").fetchone()
    assert (command, status) == ("trial", "complete")
    assert json.loads(args)[:4] == ["linerate", "trial", "--lab", "--frame-size"]


def test_the_type_stub_lists_every_cli_option():
    # Regenerate with: .venv/bin/python -m linerate._stub > crates/python/python/linerate/__init__.pyi
    from linerate import _stub
    import pathlib

    committed = (pathlib.Path(linerate.__file__).parent / "__init__.pyi").read_text()
    assert committed == _stub.render(), "the stub is out of date: regenerate it (see this test)"
    assert "    mlrsearch: bool = False," in committed  # rfc2544 --mlrsearch
    assert "    exceed_ratio: Optional[Value] = None," in committed


def test_quiet_prints_nothing_and_loud_prints_the_table(no_leftovers, capfd):
    options = dict(lab=True, frame_size=128, rate="10000fps", duration="1s", no_db=True)
    quiet = linerate.trial(quiet=True, **options)
    out, err = capfd.readouterr()
    assert (out, err) == ("", ""), (out, err)
    assert quiet["tx_frames"] == 10000
    # Without quiet the same call speaks: the check above can fail.
    linerate.trial(**options)
    out, err = capfd.readouterr()
    assert "10,000" in out and "linerate:" in err, (out, err)


def test_two_threads_run_on_two_labs_at_once(no_leftovers):
    # Each call builds its own lab (run<pid>, run<pid>b), hears only its
    # own events and counts exactly, while the other runs beside it.
    import threading

    results, heard, errors = {}, {128: [], 256: []}, []

    def one(size):
        try:
            results[size] = linerate.trial(
                lab=True, frame_size=size, rate="5000fps", duration="3s", no_db=True, quiet=True,
                progress=lambda name, fields: heard[size].append((name, fields)),
            )
        except Exception as e:  # reported below, with the other thread's outcome
            errors.append(f"{size}: {e!r}")

    threads = [threading.Thread(target=one, args=(size,)) for size in (128, 256)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for size, result in results.items():
        assert result["frame_size"] == size
        assert result["tx_frames"] == 15000, result
        assert result["rx_frames"] == 15000, result
        done = [fields for name, fields in heard[size] if name == "trial_done"]
        assert [d["result"]["frame_size"] for d in done] == [size], heard[size]


def pcap_records(path):
    """The original lengths of the frames in a pcap file (nanosecond
    timestamps, Ethernet: as linerate writes it)."""
    import struct

    data = path.read_bytes()
    magic, _, _, _, _, _, link = struct.unpack("=IHHiIII", data[:24])
    assert (magic, link) == (0xA1B23C4D, 1), (hex(magic), link)
    lengths, at = [], 24
    while at < len(data):
        _, _, kept, orig = struct.unpack("=IIII", data[at:at + 16])
        lengths.append(orig)
        at += 16 + kept
    assert at == len(data), f"{path}: a record cut short"
    return lengths


def test_two_threads_capture_to_their_own_pcaps_at_once(no_leftovers, tmp_path):
    # The capture belongs to the run, not the process: two runs at once on
    # two labs each write their own file, holding their own frames only
    # (128- and 256-byte test frames, 124 and 252 bytes as received), each
    # its first pcap_frames frames of the trial and those around losses.
    import threading

    results, errors = {}, []

    def one(size):
        try:
            results[size] = linerate.trial(
                lab=True, engine="af_packet", frame_size=size, rate="5000fps", duration="3s",
                pcap=str(tmp_path / f"{size}.pcap"), pcap_frames=50, no_db=True, quiet=True,
            )
        except Exception as e:  # reported below, with the other thread's outcome
            errors.append(f"{size}: {e!r}")

    threads = [threading.Thread(target=one, args=(size,)) for size in (128, 256)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for size, other in ((128, 256), (256, 128)):
        assert results[size]["rx_frames"] == 15000, results[size]
        lengths = pcap_records(tmp_path / f"{size}.pcap")
        assert len(lengths) >= 50, (size, lengths)
        if results[size]["lost_frames"] == 0:
            assert len(lengths) == 50, (size, lengths)
        # Test frames of this run's size (and ARP), none of the other's.
        assert other - 4 not in lengths, (size, lengths)
        assert lengths.count(size - 4) >= 40, (size, lengths)


def test_tunnels_with_traffic_returns_each_tunnels_time_to_first_packet(no_leftovers):
    report = linerate.tunnels(
        lab=True, scenario="vpn-gateway", count=5, traffic=True, traffic_rate="20/s",
        hold="1s", no_db=True, quiet=True,
    )
    assert report["established"] == 5
    for key in ("p50", "p90", "p99", "max"):
        assert report["ttfp_ms"][key] > 0
    frames = report["traffic"]["tunnels"]
    assert len(frames) == 5
    for tunnel, f in zip(report["tunnels"], frames):
        assert f["ttfp_ms"] >= tunnel["setup_ms"]
        assert 0 < f["received"] <= f["gateway_decrypted"] <= f["sent"]
    assert report["traffic"]["no_traffic"] == []


def test_an_option_out_of_its_mode_names_the_keywords(no_leftovers):
    # --rate skips latency's throughput search: its options mean nothing.
    with pytest.raises(linerate.BadInput) as e:
        linerate.latency(lab=True, rate="10%", search_duration="1s", no_db=True)
    message = str(e.value)
    assert message.startswith("search_duration") and "rate=" in message, message
    assert "\n" not in message and "--" not in message, message
