#!/usr/bin/env bash
# profile-generators.sh - where a generator's sending core spends its time:
# each of linerate's engines (and trafgen, if installed) sends 64-byte frames
# at 100 % from CPU 0 over one veth pair whose receiving end runs threaded
# NAPI on CPU 1 (bench-engines.sh's layout), and `perf record -C 0` samples
# the sending CPU for a few seconds in the middle of the run. A profile,
# not a rate: the rates are bench-engines.sh's job.
#
# For each row it prints the sending CPU's time split by where it ran (the
# kernel, the generator's own code, libc, the vDSO clock, BPF programs), the
# top symbols, and how busy the receiving CPU was. What it answers: how much
# of a generator's per-frame cost is its own code (which linerate can cut)
# and how much the kernel's path from the socket to the veth (which every
# generator over that socket pays, linerate's peers included).
#
# It builds nothing: run `cargo build --release -p linerate` first (or give
# --linerate PATH). It makes a namespace lrprof-<pid> with the veth pair and
# removes it on exit, error and Ctrl-C. Tools: ip, ethtool, perf, taskset.
#
# Usage (root):  scripts/profile-generators.sh [--engines "af_packet af_xdp xdp"]
#                    [--seconds 3] [--linerate PATH] [--top 8]
set -euo pipefail

ME=profile-generators
ENGINES="af_packet af_xdp xdp"
SECONDS_SAMPLED=3
TOP=8
HERE=$(cd "$(dirname "$0")/.." && pwd)
LINERATE=${CARGO_TARGET_DIR:-$HERE/target}/release/linerate
while [ $# -gt 0 ]; do
    case $1 in
        --engines) ENGINES=${2:?}; shift 2 ;;
        --seconds) SECONDS_SAMPLED=${2:?}; shift 2 ;;
        --linerate) LINERATE=${2:?}; shift 2 ;;
        --top) TOP=${2:?}; shift 2 ;;
        *) echo "$ME: unknown option $1 (see the usage at the top of $0)" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "$ME: run as root (it makes a namespace and runs perf -C 0)" >&2; exit 2; }
for t in ip ethtool perf taskset; do
    command -v $t >/dev/null || { echo "$ME: $t not found: install it (Debian: iproute2 ethtool linux-perf util-linux)" >&2; exit 2; }
done
[ -x "$LINERATE" ] || { echo "$ME: no linerate at $LINERATE: cargo build --release -p linerate, or give --linerate PATH" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "$ME: needs 2 CPUs (sender on 0, receiver on 1)" >&2; exit 2; }

NS=lrprof-$$
A=lpa$$
B=lpb$$
SCRATCH=$(mktemp -d)
cleanup() { ip netns del "$NS" 2>/dev/null || true; rm -rf "$SCRATCH"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" link add "$A" type veth peer name "$B"
ip -n "$NS" link set "$A" up
ip -n "$NS" link set "$B" up
# As bench-engines.sh: TSO/GSO off on the sender, GRO on and threaded NAPI
# on the receiver, its kthread on CPU 1.
ip netns exec "$NS" ethtool -K "$A" tso off gso off >/dev/null
ip netns exec "$NS" ethtool -K "$B" gro on >/dev/null
ip netns exec "$NS" sh -c "echo 1 > /sys/class/net/$B/threaded"
sleep 0.3
for p in $(pgrep "^napi/$B" || true); do taskset -pc 1 "$p" >/dev/null; done

cpu1_busy() { awk '/^cpu1 /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }

# profile NAME CMD...: runs CMD (which pins itself to CPU 0), samples CPU 0.
profile() {
    local name=$1; shift
    local data=$SCRATCH/${name// /-}.data
    "$@" >"$SCRATCH/${name// /-}.out" 2>&1 &
    local pid=$!
    sleep 2
    local b0 b1
    b0=$(cpu1_busy)
    perf record -q -C 0 -o "$data" -- sleep "$SECONDS_SAMPLED" 2>/dev/null
    b1=$(cpu1_busy)
    wait "$pid" || true
    echo "## $name"
    echo "receiving CPU 1 busy: $(echo "$b0 $b1" | awk '{d=$3-$1; i=$4-$2; printf "%.0f %%", 100*d/(d+i)}')"
    echo "sending CPU 0, share of samples by where they ran:"
    { perf report -i "$data" --no-children --sort dso -q 2>/dev/null || true; } \
        | awk '{pct=$1; sub(/^ +/,""); $1=""; sub(/^ /,""); d=$0;
                if (d ~ /kernel/) k+=pct; else if (d ~ /^bpf_prog/) b+=pct;
                else if (d ~ /vdso/) v+=pct; else if (d ~ /libc/) c+=pct;
                else if (d == "linerate" || d == "trafgen") o+=pct; else x+=pct}
               END {printf "  kernel %.1f %%, BPF programs %.1f %%, own code %.1f %%, libc %.1f %%, vDSO clock %.1f %%, other %.1f %%\n", k, b, o, c, v, x}'
    echo "top symbols:"
    # (head closes the pipe early: not an error)
    { perf report -i "$data" --no-children --sort dso,sym -q 2>/dev/null || true; } | head -n "$TOP" | sed 's/^/ /' || true
    echo
}

echo "$ME: $(date -u '+%F %T') UTC, $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$ME: $("$LINERATE" --version); veth $A -> $B in $NS; sender on CPU 0, receiver NAPI on CPU 1; 64 B at 100 %"
echo
for e in $ENGINES; do
    profile "linerate $e" taskset -c 0 ip netns exec "$NS" "$LINERATE" trial --no-db \
        --engine "$e" --port-a "$A" --port-b "$B" \
        --ip-a 198.18.0.2/24 --gw-a 198.18.0.3 --ip-b 198.18.0.3/24 --gw-b 198.18.0.2 \
        --frame-size 64 --rate 100% --line-speed 100G --duration "$((SECONDS_SAMPLED + 3))s" \
        --straggler-wait 200ms
done
if command -v trafgen >/dev/null; then
    # As bench-engines.sh's trafgen row: 64-byte IPv4/UDP frames, the TX
    # ring sized to the send buffer (trafgen 0.6.8 dies on EAGAIN beyond it).
    cfg=$SCRATCH/trafgen.cfg
    cat >"$cfg" <<EOF
{
  eth(da=$(ip netns exec "$NS" cat "/sys/class/net/$B/address"), sa=$(ip netns exec "$NS" cat "/sys/class/net/$A/address"), type=0x0800),
  ipv4(saddr=198.18.0.2, daddr=198.18.0.3, ttl=64),
  udp(sp=19538, dp=19538),
  fill(0x00, 18)
}
EOF
    frames=16
    sndbuf=$(ip netns exec "$NS" cat /proc/sys/net/core/wmem_default)
    while [ $(( frames * 2 * (60 + 1024) )) -le "$sndbuf" ]; do frames=$(( frames * 2 )); done
    profile trafgen timeout "$((SECONDS_SAMPLED + 3))" ip netns exec "$NS" taskset -c 0 \
        trafgen --dev "$A" --conf "$cfg" --cpus 1 --no-sock-mem -Q -S "$(( frames * 2 ))KiB"
fi
echo "$ME: $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
