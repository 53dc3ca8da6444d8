#!/usr/bin/env bash
# xdp-counter-cost.sh - what linerate's in-kernel counter (crates/bpf/bpf/xdp_count.bpf.c)
# costs per frame, measured by the kernel itself: with kernel.bpf_stats_enabled=1
# the kernel adds up every run of every BPF program (run_cnt, run_time_ns), and
# bpftool prints the sums. A `linerate trial --engine xdp` runs on a veth pair
# set up as scripts/bench-engines.sh does (generator on CPU 0, the receiving
# veth's threaded NAPI on CPU 1); the counter attached to the receiving veth is
# sampled twice inside the trial, and the script prints the difference:
# run_time_ns / run_cnt = mean ns per frame, the program alone (the clock
# reads bpf_stats adds around each run are not included in run_time_ns, but
# they do slow the receiver, so the trial's frame rate here is lower than in
# the bench).
#
# Usage (root):  scripts/xdp-counter-cost.sh [--linerate PATH] [--duration S] [--size 64] [--repeat N]
#                                           [--frame-check payload|headers[,..]] (default payload)
# With several frame checks (e.g. headers,payload) each round runs one
# trial per check, alternating, so they share the machine's state.
# Needs bpftool (Debian: bpftool), ip, ethtool, taskset, jq. bpf_stats_enabled
# is put back to what it was on exit; the namespace is removed.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
LINERATE=${LINERATE:-}
DURATION=6
SIZE=64
REPEAT=1
CHECKS=payload
while [ $# -gt 0 ]; do
    case "$1" in
        --linerate) LINERATE=${2:?}; shift 2 ;;
        --duration) DURATION=${2:?}; shift 2 ;;
        --size) SIZE=${2:?}; shift 2 ;;
        --repeat) REPEAT=${2:?}; shift 2 ;;
        --frame-check) CHECKS=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option '$1'" >&2; exit 2 ;;
    esac
done
if [ -z "$LINERATE" ]; then
    LINERATE=${CARGO_TARGET_DIR:-$REPO/target}/release/linerate
fi
[ -x "$LINERATE" ] || { echo "no linerate binary at $LINERATE (cargo build --release)" >&2; exit 2; }
command -v bpftool >/dev/null || { echo "bpftool not installed (Debian: bpftool)" >&2; exit 2; }
[ "$DURATION" -ge 4 ] || { echo "--duration must be at least 4 s" >&2; exit 2; }

NS=lrcost-$$
IF_TX=lc$$t
IF_RX=lc$$r
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
    sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS" || true
    ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" link add "$IF_TX" type veth peer name "$IF_RX"
ip -n "$NS" link set "$IF_TX" up
ip -n "$NS" link set "$IF_RX" up
ip netns exec "$NS" ethtool -K "$IF_TX" tso off gso off >/dev/null
ip netns exec "$NS" ethtool -K "$IF_RX" gro on >/dev/null
ip netns exec "$NS" sh -c "echo 1 > /sys/class/net/$IF_RX/threaded"
pin_napi() {
    local p
    for p in $(ps -eo pid=,comm= | awk -v p="napi/$IF_RX" 'index($2, p "-") == 1 { print $1 }'); do
        taskset -pc 1 "$p" >/dev/null
    done
}
pin_napi
sysctl -qw kernel.bpf_stats_enabled=1

prog_stats() { # prints "run_cnt run_time_ns" of the XDP program on IF_RX
    local id
    id=$(ip -n "$NS" -j link show "$IF_RX" | jq -r '.[0].xdp.prog.id // empty')
    [ -n "$id" ] || return 1
    bpftool -j prog show id "$id" | jq -r '"\(.run_cnt // 0) \(.run_time_ns // 0) \(.name)"'
}

for r in $(seq "$REPEAT"); do
  for CHECK in ${CHECKS//,/ }; do
    pin_napi
    json=$(mktemp /tmp/lrcost.XXXXXX.json)
    ip netns exec "$NS" taskset -c 0 "$LINERATE" trial --port-a "$IF_TX" --port-b "$IF_RX" \
        --ip-a 198.18.0.2/24 --gw-a 198.18.0.3 --ip-b 198.18.0.3/24 --gw-b 198.18.0.2 \
        --frame-size "$SIZE" --rate 100% --line-speed 100G --duration "${DURATION}s" \
        --straggler-wait 200ms --engine xdp --frame-check "$CHECK" --json "$json" >/dev/null 2>&1 &
    pid=$!
    # Sample from 1.5 s into the trial (ARP and setup done) to 1 s before its end.
    sleep 1.5
    s0=$(prog_stats) || { wait $pid || true; echo "no XDP program on $IF_RX" >&2; exit 1; }
    t0=$(date +%s%N)
    sleep $(( DURATION - 3 ))
    s1=$(prog_stats)
    t1=$(date +%s%N)
    wait $pid || true
    set -- $s0 $s1
    awk -v c0="$1" -v n0="$2" -v c1="$4" -v n1="$5" -v name="$6" -v t0="$t0" -v t1="$t1" \
        -v rx="$(jq -r .rx_frames "$json" 2>/dev/null)" -v err="$(jq -r .errored_frames "$json" 2>/dev/null)" \
        -v size="$SIZE" -v check="$CHECK" 'BEGIN {
        runs = c1 - c0; ns = n1 - n0
        printf "xdp-counter-cost: %s, %d B, %s check: %d runs in %.2f s (%.3f Mpps at the counter), %.1f ns per run; trial rx_frames %s, errored %s\n",
            name, size, check, runs, (t1 - t0) / 1e9, runs / ((t1 - t0) / 1e3), ns / runs, rx, err
    }'
    rm -f "$json"
  done
done
