#!/usr/bin/env python3
"""The README's main job from Python: the RFC 2544 throughput of the lab's
Linux router for frame sizes 64..1518, with MLRsearch's NDR and PDR after
each size, printed as the LANCOM table's rows (Mbps at L2 and frames/s),
from the dict linerate.rfc2544 returns.

    .venv/bin/python examples/rfc2544_table.py                 # all seven sizes
    .venv/bin/python examples/rfc2544_table.py --sizes 64 1518
"""

import argparse

import linerate


def goal_fps(result: dict, name: str) -> float:
    """The conditional throughput MLRsearch found for goal `name` (NDR, PDR)."""
    for g in result["mlrsearch"]["goals"]:
        if g["goal"]["name"] == name:
            return g.get("conditional_throughput_fps") or 0.0
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 1280, 1518])
    parser.add_argument("--trial-duration", default="1s")
    args = parser.parse_args()

    def progress(event, fields):
        if event == "trial_done":
            r = fields["result"]
            print(f"  {r['frame_size']:>5} B  {r['intended_fps']:>12,.0f} fps  loss {100 * r['loss_ratio']:.4f} %")

    report = linerate.rfc2544(
        lab=True,
        sizes=args.sizes,
        trial_duration=args.trial_duration,
        mlrsearch=True,
        no_db=True,
        quiet=True,
        progress=progress,
    )
    rows = report["results"]
    print(f"RFC 2544 throughput, {report['description']}, loss allowed {100 * report['allowed_loss_ratio']:g} %")
    print(f"{'frame size [bytes]':<20}" + "".join(f"{r['frame_size']:>12}" for r in rows))
    print(f"{'Throughput [Mbps]':<20}" + "".join(f"{r['throughput_mbps_l2']:>12,.0f}" for r in rows) + "   (L2)")
    print(f"{'Throughput [fps]':<20}" + "".join(f"{r['throughput_fps']:>12,.0f}" for r in rows))
    for name in ("NDR", "PDR"):
        fps = [goal_fps(r, name) for r in rows]
        print(f"{name + ' [fps]':<20}" + "".join(f"{f:>12,.0f}" for f in fps) + "   (MLRsearch)")
    print(f"{'Line rate [fps]':<20}" + "".join(f"{r['line_rate_fps']:>12,.0f}" for r in rows))
    limited = [str(r["frame_size"]) for r in rows if r["tester_limited"]]
    if limited:
        print(f"* limited by the tester's own ceiling at {', '.join(limited)} bytes")


if __name__ == "__main__":
    main()
