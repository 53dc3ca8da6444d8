#!/usr/bin/env bash
# How well linerate's lab results repeat: runs the main job (the RFC 2544
# throughput of the lab router, all seven frame sizes, with MLRsearch's NDR
# and PDR after each: rfc2544 --lab --mlrsearch --trial-duration 1s) N
# times and a comparison of three DUT configurations N times, and prints
#   - per frame size, the zero-loss throughput, the NDR and the PDR of each
#     run and their spreads (max/min; target: at most 1.25),
#   - the 64-byte zero-loss rate against what the router forwarded under
#     overload in the same search (its first trial, at line rate; target:
#     at least half),
#   - whether every comparison run ranks lan-lan > acl:12 > firewall:50,
#   - each run's level (its zero-loss rates against the fastest run's, over
#     the sizes below line rate) and the spreads once each run is divided
#     by its level: a slow run as a whole, or sizes that disagree.
# With --repeat R every run is `rfc2544 --repeat R`: each size searched in R
# rounds, its figures the medians over them (what to publish from a shared
# VM, docs/BENCHMARKS.md); the spreads are then those of the medians.
# Run as root on a quiet machine (no builds or tests meanwhile: on 2 cores
# one compile skews every figure). Build first (scripts/setup.sh).
#
#   scripts/bench-repeatability.sh [--runs N] [--repeat R] [--linerate PATH] [--out DIR]
#   scripts/bench-repeatability.sh --report --out DIR [--runs N]
#
# The JSON of every run, and the table it printed (main-N.txt, compare-N.txt),
# are kept in DIR (default: a new directory under /tmp). --report runs
# nothing: it prints the summary of the N runs already in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
repeat=1
report=0
linerate=target/release/linerate
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --repeat) repeat="$2"; shift 2 ;;
        --linerate) linerate="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --report) report=1; shift ;;
        *) echo "bench-repeatability.sh: unknown option '$1' (--runs N, --repeat R, --linerate PATH, --out DIR, --report)" >&2; exit 2 ;;
    esac
done
if [ "$report" = 1 ]; then
    [ -n "$out" ] && [ -f "$out/main-1.json" ] || { echo "bench-repeatability.sh: --report needs --out DIR with the runs' JSON (main-1.json ...)" >&2; exit 2; }
elif [ "$(id -u)" != 0 ]; then
    echo "bench-repeatability.sh: run as root (the lab builds network namespaces)" >&2
    exit 2
fi
[ "$report" = 1 ] || [ -x "$linerate" ] || { echo "bench-repeatability.sh: no $linerate: build it with scripts/setup.sh" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/linerate-repeat.XXXXXX)
mkdir -p "$out"

[ "$report" = 1 ] && runs_to_make=0 || runs_to_make="$runs"
[ "$report" = 1 ] || echo "bench-repeatability.sh: $runs runs each of $repeat round(s), JSON in $out, $("$linerate" --version 2>/dev/null || echo linerate) at $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for i in $(seq 1 "$runs_to_make"); do
    start=$(date +%s)
    "$linerate" rfc2544 --lab --mlrsearch --trial-duration 1s --repeat "$repeat" --no-db --quiet \
        --json "$out/main-$i.json" >"$out/main-$i.txt"
    echo "main job run $i: $(( $(date +%s) - start )) s"
done
for i in $(seq 1 "$runs_to_make"); do
    start=$(date +%s)
    "$linerate" rfc2544 --scenario lan-lan,acl:12,firewall:50 --sizes 64 --mlrsearch \
        --trial-duration 1s --repeat "$repeat" --no-db --quiet \
        --json "$out/compare-$i.json" >"$out/compare-$i.txt"
    echo "comparison run $i: $(( $(date +%s) - start )) s"
done

python3 - "$out" "$runs" <<'EOF'
import json, sys
out, runs = sys.argv[1], int(sys.argv[2])
main = [json.load(open(f"{out}/main-{i}.json")) for i in range(1, runs + 1)]
sizes = [r["frame_size"] for r in main[0]["results"]]
print()
def goal(result, name):
    # --repeat: the goal's median over the rounds.
    for g in (result.get("over_rounds") or {}).get("goals", []):
        if g["name"] == name:
            return g["figure"]["median_fps"]
    for g in (result.get("mlrsearch") or {}).get("goals", []):
        if g["goal"]["name"] == name:
            return g.get("conditional_throughput_fps") or 0.0
    return 0.0

worst = {}
for label, value in [("Zero-loss throughput", lambda r: r["throughput_fps"]),
                     ("NDR (MLRsearch)", lambda r: goal(r, "NDR")),
                     ("PDR (MLRsearch)", lambda r: goal(r, "PDR"))]:
    print(f"{label} [frames/s] per run, and the spread (max/min; target <= 1.25)")
    print("size  " + "".join(f"{'run ' + str(i + 1):>12}" for i in range(runs)) + "      spread")
    worst[label] = 0.0
    for k, size in enumerate(sizes):
        fps = [value(m["results"][k]) for m in main]
        spread = max(fps) / min(fps) if min(fps) > 0 else float("inf")
        worst[label] = max(worst[label], spread)
        flag = "" if spread <= 1.25 else "   above target"
        print(f"{size:>4}  " + "".join(f"{f:>12,.0f}" for f in fps) + f"  {spread:10.2f}{flag}")
    print()
for label, w in worst.items():
    print(f"{label}: worst spread {w:.2f} (target <= 1.25): {'met' if w <= 1.25 else 'NOT met'}")

# A run slow as a whole (the machine, for minutes) against sizes that
# disagree: each run's level is the geometric mean of its zero-loss rates
# over the sizes below line rate in every run, against the fastest run's.
import math
below = [k for k in range(len(sizes))
         if all(m["results"][k]["throughput_fps"] < 0.99 * m["results"][k]["line_rate_fps"] for m in main)]
if below:
    fps = [[m["results"][k]["throughput_fps"] for k in below] for m in main]
    if all(f > 0 for run in fps for f in run):
        level = [math.exp(sum(math.log(f) for f in run) / len(run)) for run in fps]
        top = max(level)
        print()
        print(f"Run level: zero-loss throughput over {', '.join(str(sizes[k]) for k in below)} bytes (geometric mean), against the fastest run")
        print("  ".join(f"run {i + 1}: {l / top:.2f}" for i, l in enumerate(level)))
        shape = max(max(run[j] / l for run, l in zip(fps, level)) / min(run[j] / l for run, l in zip(fps, level))
                    for j in range(len(below)))
        print(f"worst zero-loss spread once each run is divided by its level: {shape:.2f}")

print()
print("Time the hypervisor took from the router's CPU (steal, dut_cpu.stolen_pct) over each run's trials:")
print("a run whose router lost CPU time to other guests finds lower rates; the likeliest cause of a spread")
for i, m in enumerate(main):
    stolen = [t["dut_cpu"]["stolen_pct"] for r in (m.get("round_results") or m["results"]) for t in r["trials"]
              if (t.get("dut_cpu") or {}).get("stolen_pct") is not None]
    if stolen:
        hit = sum(1 for s in stolen if s >= 1.0)
        print(f"run {i + 1}: mean {sum(stolen) / len(stolen):.1f} %, max {max(stolen):.1f} %, "
              f"{hit} of {len(stolen)} trials at 1 % or more")
    else:
        print(f"run {i + 1}: not measured")

print()
print("64-byte zero-loss rate against the router's forwarding rate under overload")
print("(the first trial of each 64-byte search, at line rate: frames received over the time the frames")
print(" took to send, tx_frames / offered_fps)")
ok = True
for i, m in enumerate(main):
    r = next(r for r in m["results"] if r["frame_size"] == 64)
    first = r["trials"][0]
    took = first["tx_frames"] / first["offered_fps"] if first["offered_fps"] else first["duration_s"]
    overload = first["rx_frames"] / took
    share = r["throughput_fps"] / overload if overload else 0.0
    ok &= share >= 0.5
    print(f"run {i + 1}: zero-loss {r['throughput_fps']:,.0f} fps, under overload {overload:,.0f} fps: {share:.2f} (target >= 0.5)")
print(f"target {'met' if ok else 'NOT met'}")

print()
for label, value in [("zero-loss", lambda r: r["throughput_fps"]),
                     ("NDR", lambda r: goal(r, "NDR")),
                     ("PDR", lambda r: goal(r, "PDR"))]:
    print(f"Comparison lan-lan > acl:12 > firewall:50 at 64 bytes, {label} frames/s")
    ranked = True
    for i in range(1, runs + 1):
        c = json.load(open(f"{out}/compare-{i}.json"))["comparison"]
        fps = {rep["scenario"]["spec"]: value(rep["results"][0]) for rep in c}
        order = fps["lan-lan"] > fps["acl:12"] > fps["firewall:50"]
        ranked &= order
        print(f"run {i}: " + ", ".join(f"{k} {v:,.0f}" for k, v in fps.items()) + ("" if order else "   NOT in order"))
    print(f"ranking {'held in every run' if ranked else 'did NOT hold in every run'}")
    print()
EOF
