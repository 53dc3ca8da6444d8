#!/usr/bin/env python3
"""How late a real-time thread wakes up on each CPU: the stalls a lab DUT's
forwarding thread sees, whatever its priority.

Usage (root): scripts/wakeup-latency.py [--seconds 15] [--priority 50]

One SCHED_FIFO thread per CPU, pinned, sleeps 200 us again and again and
records how much later than asked it ran. A wake-up later than the time
the DUT's input ring lasts (a veth's 256 frames: 0.43 ms at 600,000
frames/s) is a loss at that rate however fast the DUT forwards. Run it on a
quiet machine; it prints one line per CPU.
"""
import argparse
import multiprocessing
import os
import time

SLEEP_NS = 200_000


def probe(cpu, seconds, priority, out):
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    late = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter_ns()
        time.sleep(SLEEP_NS / 1e9)
        late.append(time.perf_counter_ns() - t - SLEEP_NS)
    late.sort()
    n = len(late)
    q = lambda p: late[min(n - 1, int(n * p))] / 1e3
    out.put(
        f"CPU {cpu}: {n} wake-ups, late by p50 {q(0.5):.0f} us, p99 {q(0.99):.0f} us, "
        f"p99.9 {q(0.999):.0f} us, max {late[-1] / 1e3:.0f} us; "
        f"{sum(x > 300_000 for x in late)} over 0.3 ms, {sum(x > 1_000_000 for x in late)} over 1 ms"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--priority", type=int, default=50)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("wakeup-latency: needs root (SCHED_FIFO): run it as root")
    out = multiprocessing.Queue()
    cpus = sorted(os.sched_getaffinity(0))
    procs = [multiprocessing.Process(target=probe, args=(c, a.seconds, a.priority, out)) for c in cpus]
    for p in procs:
        p.start()
    lines = [out.get() for _ in procs]
    for p in procs:
        p.join()
    print(f"SCHED_FIFO {a.priority}, sleeps of {SLEEP_NS // 1000} us, {a.seconds:g} s")
    for line in sorted(lines):
        print(line)


if __name__ == "__main__":
    main()
