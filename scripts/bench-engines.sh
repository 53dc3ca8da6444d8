#!/usr/bin/env bash
# bench-engines.sh - linerate's packet engines against peer generators, side by
# side in ONE run, back to back over one veth pair, counted at the receiver.
#
# On a shared, noisy machine absolute figures drift from run to run; peers
# measured minutes apart in the same run, placed the same way, are compared
# as ratios (printed at the end). Other load still moves single rows: use
# --rounds N to repeat every row and keep each row's best.
#
#   rows     trafgen (netsniff-ng, PACKET_TX_RING), dpdk-testpmd txonly over
#            net_af_packet and net_af_xdp, xdp-trafficgen (xdp-tools >= 1.5,
#            XDP live frames, the peer of linerate's xdp engine), with
#            --xdp-bench also xdp-trafficgen into xdp-bench's `drop -p
#            read-data` at the receiver (the peer of linerate's whole xdp
#            pipeline: an XDP generator into an XDP sink that reads every
#            frame), iperf3 -u, and `linerate trial` with each engine
#   columns  frames/s at 64 and 1518 bytes (frame size with the 4-byte FCS),
#            counted at the receiving veth; Gbit/s L2 for 1518
#   cores    every generator (all user space of every tool) on CPU 0, the
#            receiving veth's threaded-NAPI kthread on CPU 1. With
#            --tx-threads N every generator sends with N threads on CPUs
#            0..N-1 (linerate --tx-threads N, xdp-trafficgen --threads N,
#            trafgen --cpus N; testpmd and iperf3 are n/a) over a veth with
#            N queues, the NAPI kthreads still on CPU 1: on a 2-CPU machine
#            thread 1 shares the receiver's CPU, and the rows show whose
#            generator leaves the receiver more of it
#
# Tools: ip, ethtool, taskset, jq, timeout, setsid (required); trafgen
# (Debian netsniff-ng), dpdk-testpmd (Debian dpdk-dev on bookworm) with the
# AF_XDP PMD (librte-net-af-xdp23), iperf3, GNU time (Debian time) - a row
# whose tool is missing is reported n/a. scripts/setup.sh installs them; this
# script installs nothing. xdp-trafficgen must come from xdp-tools v1.5 or
# later (Debian bookworm's 1.3.1 cannot load on recent kernels): build it
# from source and pass --xdp-trafficgen PATH (or have it first in PATH).
#
# Usage (root):  scripts/bench-engines.sh [--duration S] [--rounds N] [--out FILE] [--tx-threads N]
#                    [--linerate PATH] [--engines "af_packet af_xdp xdp af_packet/socket af_xdp/socket"]
#                    [--mem-engine E] [--line-speed 100G] [--warmup S] [--xdp-trafficgen PATH]
#                    [--xdp-bench PATH]
# --rounds N repeats every row N times (interleaved) and reports the best.
# Environment equivalents: BENCH_DURATION, BENCH_ROUNDS, BENCH_OUT, TX_THREADS, LINERATE,
# BENCH_ENGINES, MEM_ENGINE, BENCH_LINE_SPEED, BENCH_WARMUP, XDP_TRAFFICGEN, XDP_BENCH.
# See docs/BENCHMARKS.md.
set -euo pipefail

ME=bench-engines
REPO=$(cd "$(dirname "$0")/.." && pwd)

DURATION=${BENCH_DURATION:-5}
ROUNDS=${BENCH_ROUNDS:-1}
ROUND=1
WARMUP=${BENCH_WARMUP:-0.5}
OUT=${BENCH_OUT:-}
TX_THREADS=${TX_THREADS:-}
# An engine as E (port B counts as linerate's default, --receiver auto: in the
# kernel) or E/socket (--receiver socket: through the engine's own socket).
ENGINES=${BENCH_ENGINES:-af_packet af_xdp xdp af_packet/socket af_xdp/socket}
MEM_ENGINE=${MEM_ENGINE:-af_packet}
# `--rate 100%` is a share of the line speed. veth reports 10G, which would hold
# linerate at 0.81 Mpps for 1518-byte frames while the peers run unlimited; a
# 100G line speed makes 100% mean "as fast as the engine can", like the peers.
LINE_SPEED=${BENCH_LINE_SPEED:-100G}
LINERATE=${LINERATE:-}
XDP_TRAFFICGEN=${XDP_TRAFFICGEN:-}
XDP_BENCH=${XDP_BENCH:-}
SIZES=(64 1518)
TX_CPU=0
RX_CPU=1

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        --duration) DURATION=${2:?}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --warmup) WARMUP=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        --tx-threads) TX_THREADS=${2:?}; shift 2 ;;
        --linerate) LINERATE=${2:?}; shift 2 ;;
        --engines) ENGINES=${2:?}; shift 2 ;;
        --mem-engine) MEM_ENGINE=${2:?}; shift 2 ;;
        --line-speed) LINE_SPEED=${2:?}; shift 2 ;;
        --xdp-trafficgen) XDP_TRAFFICGEN=${2:?}; shift 2 ;;
        --xdp-bench) XDP_BENCH=${2:?}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "$ME: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
DURATION=${DURATION%s}
WARMUP=${WARMUP%s}
if ! [[ $DURATION =~ ^[0-9]+$ ]] || [ "$DURATION" -lt 1 ]; then
    echo "$ME: --duration must be whole seconds >= 1, got '$DURATION'" >&2; exit 2
fi
if ! [[ $ROUNDS =~ ^[0-9]+$ ]] || [ "$ROUNDS" -lt 1 ]; then
    echo "$ME: --rounds must be a number >= 1, got '$ROUNDS'" >&2; exit 2
fi
if [ -n "$TX_THREADS" ] && { ! [[ $TX_THREADS =~ ^[0-9]+$ ]] || [ "$TX_THREADS" -lt 1 ]; }; then
    echo "$ME: --tx-threads must be a number >= 1, got '$TX_THREADS'" >&2; exit 2
fi
# Every generator sends with THREADS threads on CPUs 0..THREADS-1 (linerate
# --tx-threads, xdp-trafficgen --threads, trafgen --cpus: each pins thread k
# to the k-th of those CPUs), through a veth with a queue per thread.
THREADS=${TX_THREADS:-1}
if [ "$THREADS" -gt "$(nproc)" ]; then
    echo "$ME: --tx-threads $THREADS is more than the $(nproc) CPUs here: give at most $(nproc)" >&2; exit 2
fi
TX_CPUS=$TX_CPU
[ "$THREADS" = 1 ] || TX_CPUS="$TX_CPU-$(( TX_CPU + THREADS - 1 ))"
[ -n "$OUT" ] || OUT=/tmp/lrbench-$(date +%Y%m%d-%H%M%S)-$$.tsv

if [ "$(id -u)" != 0 ]; then
    echo "$ME: run as root (it creates namespaces and veths): sudo $0" >&2; exit 2
fi

# --- tools -------------------------------------------------------------------
missing_req=()
for t in ip ethtool taskset jq timeout setsid awk; do
    command -v "$t" >/dev/null 2>&1 || missing_req+=("$t")
done
if [ ${#missing_req[@]} -gt 0 ]; then
    echo "$ME: missing required tools: ${missing_req[*]} (scripts/setup.sh installs them)" >&2; exit 2
fi
declare -A MISSING=()
command -v trafgen >/dev/null 2>&1 || MISSING[trafgen]="trafgen not installed (Debian: netsniff-ng)"
command -v dpdk-testpmd >/dev/null 2>&1 || MISSING[testpmd]="dpdk-testpmd not installed (Debian: dpdk-dev)"
command -v iperf3 >/dev/null 2>&1 || MISSING[iperf3]="iperf3 not installed (Debian: iperf3)"
# xdp-trafficgen: only v1.5 or later ("xdp-trafficgen udp --version" prints
# "xdp-trafficgen version 1.5.8 using libbpf version ...").
[ -n "$XDP_TRAFFICGEN" ] || XDP_TRAFFICGEN=$(command -v xdp-trafficgen || true)
XTG_VERSION=
if [ -n "$XDP_TRAFFICGEN" ] && [ -x "$XDP_TRAFFICGEN" ]; then
    XTG_VERSION=$("$XDP_TRAFFICGEN" udp --version 2>&1 | sed -n 's/^xdp-trafficgen version v\{0,1\}\([0-9][0-9.]*\).*/\1/p' | head -1 || true)
fi
if [ -z "$XTG_VERSION" ]; then
    MISSING[xdp-trafficgen]="xdp-trafficgen not found (build xdp-tools v1.5.8 from source; pass --xdp-trafficgen PATH)"
elif ! printf '%s\n' "1.5" "$XTG_VERSION" | sort -V -C; then
    MISSING[xdp-trafficgen]="xdp-trafficgen v$XTG_VERSION is older than v1.5 and cannot load here (build xdp-tools v1.5.8 from source; pass --xdp-trafficgen PATH)"
fi
# xdp-bench (the same xdp-tools build): the XDP sink of the xdp-trafficgen
# row that the receiver's stack does not slow (`drop -p read-data`).
XDP_SINK_ROW="xdp-trafficgen -> xdp-bench"
if [ -n "$XDP_BENCH" ] && [ ! -x "$XDP_BENCH" ]; then
    MISSING[xdp-bench]="xdp-bench not found at $XDP_BENCH (build xdp-tools v1.5.8 from source: make -C xdp-bench)"
elif [ -z "$XDP_BENCH" ]; then
    MISSING[xdp-bench]="no --xdp-bench PATH given"
fi
[ -z "${MISSING[xdp-trafficgen]:-}" ] || MISSING[xdp-bench]=${MISSING[xdp-trafficgen]}
GNU_TIME=
if [ -x /usr/bin/time ] && /usr/bin/time --version 2>&1 | grep -q GNU; then GNU_TIME=/usr/bin/time; fi
if [ -z "$LINERATE" ]; then
    for c in "${CARGO_TARGET_DIR:-$REPO/target}/release/linerate" "$REPO/target/release/linerate"; do
        if [ -x "$c" ]; then LINERATE=$c; break; fi
    done
fi
if [ -z "$LINERATE" ] || [ ! -x "$LINERATE" ]; then
    echo "$ME: no linerate binary (build it: cargo build --release, or pass --linerate PATH)" >&2; exit 2
fi
echo "$ME: tools:" \
    "trafgen=$(command -v trafgen || echo MISSING)" \
    "dpdk-testpmd=$(command -v dpdk-testpmd || echo MISSING)" \
    "iperf3=$(command -v iperf3 || echo MISSING)" \
    "xdp-trafficgen=${XDP_TRAFFICGEN:-MISSING}${XTG_VERSION:+ (v$XTG_VERSION)}" \
    "gnu-time=${GNU_TIME:-MISSING (using /proc VmHWM polling)}" \
    "linerate=$LINERATE"

NCPU=$(nproc)
if [ "$NCPU" -lt 2 ]; then
    echo "$ME: WARNING: 1 CPU: generator and receiver share CPU 0" >&2
    RX_CPU=0
fi

# --- names, scratch, cleanup --------------------------------------------------
NS_TX=lrbench-$$-tx         # holds the sending end, and both ends for all rows but iperf3
NS_RX=lrbench-$$-rx         # holds the receiving end for iperf3 (it needs kernel IPs on both sides)
IF_TX=lb$$t
IF_RX=lb$$r
DPDK_PREFIX=lrbench$$
SCRATCH=$(mktemp -d /tmp/lrbench.XXXXXX)
PIDFILE=$SCRATCH/pids
: >"$PIDFILE"
RX_NS=$NS_TX                # where IF_RX lives now

cleanup() {
    local rc=$? p i
    trap - EXIT INT TERM
    if [ -s "$PIDFILE" ]; then
        while read -r p; do
            [ -n "$p" ] || continue
            kill -KILL -- "-$p" 2>/dev/null || true
            kill -KILL "$p" 2>/dev/null || true
        done <"$PIDFILE"
        # A killed generator may take a moment to release its rings.
        for i in $(seq 50); do
            while read -r p; do alive "$p" && break; done <"$PIDFILE" || break
            sleep 0.1
        done
    fi
    ip netns del "$NS_TX" 2>/dev/null || true
    ip netns del "$NS_RX" 2>/dev/null || true
    rm -rf "/var/run/dpdk/$DPDK_PREFIX"
    rmdir /var/run/dpdk 2>/dev/null || true
    # Keep every tool's output beside the results, for a row that went wrong.
    rm -f "$PIDFILE"
    rm -rf "$OUT.logs"
    mv "$SCRATCH" "$OUT.logs" 2>/dev/null || rm -rf "$SCRATCH"
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "$ME: interrupted" >&2; exit 130' INT TERM

# --- helpers -----------------------------------------------------------------
# spawn LOG CMD...: runs CMD in a session of its own (so the whole group can
# be signalled), output to LOG; sets SPAWNED to its pid (== the group id).
spawn() {
    local log=$1; shift
    setsid "$@" >"$log" 2>&1 </dev/null &
    SPAWNED=$!
    echo "$SPAWNED" >>"$PIDFILE"
}

alive() {
    local st
    st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

# stop_group PID: SIGINT to the group, up to 5 s to end, then SIGKILL; reaps it.
stop_group() {
    local pid=$1 i
    kill -INT -- "-$pid" 2>/dev/null || true
    for i in $(seq 50); do alive "$pid" || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# first_error LOG: the first line that looks like the reason a tool failed.
first_error() {
    local line
    # (testpmd's statistics print "RX-errors: 0": not a reason)
    line=$(grep -a -iE 'error|cause|fail|invalid|cannot|unable|not supported|unrecognized|denied|No such' "$1" 2>/dev/null \
        | grep -a -v -iE 'errors: +[0-9]' | head -n1 || true)
    [ -n "$line" ] || line=$(grep -a -m1 -v '^[[:space:]]*$' "$1" 2>/dev/null || true)
    [ -n "$line" ] || line="no output"
    printf '%s' "$line" | tr -d '\r\033' | tr '\t' ' ' | cut -c1-160
}

# counters: "<ns since epoch> <rx_packets> <rx_dropped>" of the receiving
# veth (read inside its namespace, timestamp taken right after the read) and
# "<tx_dropped>" of the sending veth: frames the receiver's ring refused.
counters() {
    local rx txd
    rx=$(ip netns exec "$RX_NS" sh -c "cat /sys/class/net/$IF_RX/statistics/rx_packets /sys/class/net/$IF_RX/statistics/rx_dropped; date +%s%N" | tr '\n' ' ')
    txd=$(ip netns exec "$NS_TX" cat "/sys/class/net/$IF_TX/statistics/tx_dropped")
    set -- $rx
    echo "$3 $1 $2 $txd"
}

napi_pids() {
    ps -eo pid=,comm= | awk -v p="napi/$IF_RX" '$2 == p || index($2, p "-") == 1 { print $1 }'
}

# napi_ticks: CPU time (user + system, clock ticks) the receiving veth's NAPI
# kthread(s) have used: over a row, divided by the frames received, what the
# receiving CPU spends per frame (NAPI_NS, in the TSV and the row's line).
napi_ticks() {
    local p t=0
    for p in $(napi_pids); do
        t=$(( t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0) ))
    done
    echo "$t"
}
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
NAPI_NS=NA
napi_ns() { # TICKS0 TICKS1 FRAMES
    awk -v a="$1" -v b="$2" -v n="$3" -v hz="$CLK_TCK" 'BEGIN { if (n > 0) printf "%.0f", (b - a) * 1e9 / hz / n; else print "NA" }'
}

# Pins the receiving veth's NAPI kthread(s) to RX_CPU; fails if there is none.
pin_napi() {
    local pids p i
    for i in $(seq 20); do
        pids=$(napi_pids)
        [ -n "$pids" ] && break
        sleep 0.05
    done
    [ -n "$pids" ] || { echo "$ME: no NAPI kthread napi/$IF_RX-* found" >&2; return 1; }
    for p in $pids; do taskset -pc "$RX_CPU" "$p" >/dev/null; done
}

# Each NAPI kthread's CPU list, comma-separated when there are several.
napi_cpus() {
    local p out=
    for p in $(napi_pids); do out+="${out:+,}$(taskset -pc "$p" 2>/dev/null | awk -F': ' '{print $2}')"; done
    echo "${out:-none}"
}

# The receiving end: NAPI (GRO on), threaded, kthread on RX_CPU.
config_rx() {
    local ns=$1
    ip -n "$ns" link set "$IF_RX" up
    ip netns exec "$ns" ethtool -K "$IF_RX" gro on >/dev/null
    ip netns exec "$ns" sh -c "echo 1 > /sys/class/net/$IF_RX/threaded" || return 1
    [ "$(ip netns exec "$ns" cat "/sys/class/net/$IF_RX/threaded")" = 1 ] || return 1
    pin_napi
}

mkns() {
    ip netns add "$1"
    ip -n "$1" link set lo up
    ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
    ip netns exec "$1" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null || true
}

setup_pair() {
    mkns "$NS_TX"
    local q=(numtxqueues "$THREADS" numrxqueues "$THREADS")
    ip -n "$NS_TX" link add "$IF_TX" mtu 1500 "${q[@]}" type veth peer name "$IF_RX" mtu 1500 "${q[@]}"
    ip -n "$NS_TX" link set "$IF_TX" up
    # Without TSO/GSO off on the sender, veth hands frames over without the
    # receiver's NAPI thread (as the lab does it, crates/lab).
    ip netns exec "$NS_TX" ethtool -K "$IF_TX" tso off gso off >/dev/null
    config_rx "$NS_TX"
    RX_NS=$NS_TX
    # A 1518-byte frame is 1514 bytes in the buffer: a 1500-byte IP packet,
    # exactly MTU 1500 (no VLAN tag). Check it is so.
    local mtu
    mtu=$(ip netns exec "$NS_TX" cat "/sys/class/net/$IF_TX/mtu")
    [ "$mtu" -ge 1500 ] || { echo "$ME: MTU $mtu < 1500: 1518-byte frames do not fit" >&2; return 1; }
}

# For iperf3: the receiving end moves to a namespace of its own, both ends get
# kernel addresses. Moving re-creates the NAPI kthread: configure it again.
split_pair() {
    mkns "$NS_RX" || return 1
    ip -n "$NS_TX" link set "$IF_RX" netns "$NS_RX" || return 1
    RX_NS=$NS_RX
    config_rx "$NS_RX" || return 1
    ip -n "$NS_TX" addr add 198.18.0.2/24 dev "$IF_TX" || return 1
    ip -n "$NS_RX" addr add 198.18.0.3/24 dev "$IF_RX" || return 1
}

mac_of() { ip netns exec "$1" cat "/sys/class/net/$2/address"; }

# Same state before every row: promiscuous mode off (testpmd turns it on),
# no XDP program left on either end, NAPI kthread on RX_CPU.
prepare_row() {
    ip -n "$NS_TX" link set "$IF_TX" promisc off 2>/dev/null || true
    ip -n "$NS_TX" link set "$IF_TX" xdp off 2>/dev/null || true
    ip -n "$RX_NS" link set "$IF_RX" xdp off 2>/dev/null || true
    pin_napi
}

RESULT_COLS="row	frame_size	round	status	window_s	rx_frames	fps	mpps	gbps_l2	rx_dropped	sender_tx_dropped	napi_cpu	note	command	napi_ns_per_frame"
# result ROW SIZE STATUS WINDOW RXFRAMES FPS RXDROP TXDROP NOTE CMD -> one TSV line
result() {
    local row=$1 size=$2 status=$3 win=$4 rxf=$5 fps=$6 rxd=$7 txd=$8 note=$9 cmd=${10}
    local mpps=NA gbps=NA
    if [ "$status" = ok ]; then
        mpps=$(awk -v f="$fps" 'BEGIN { printf "%.4f", f / 1e6 }')
        gbps=$(awk -v f="$fps" -v s="$size" 'BEGIN { printf "%.3f", f * s * 8 / 1e9 }')
    fi
    note=$(printf '%s' "$note" | tr '\t\n' '  ')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$row" "$size" "$ROUND" "$status" "$win" "$rxf" "$fps" "$mpps" "$gbps" "$rxd" "$txd" "$(napi_cpus)" "$note" "$cmd" "$NAPI_NS" >>"$OUT"
    if [ "$status" = ok ]; then
        printf '%s: %-25s %4s B  %8.4f Mpps  (rx %s frames in %s s; drops rx %s, veth ring %s; receiver NAPI %s ns/frame)\n' \
            "$ME" "$row" "$size" "$mpps" "$rxf" "$win" "$rxd" "$txd" "$NAPI_NS" >&2
    else
        printf '%s: %-25s %4s B  n/a (%s)\n' "$ME" "$row" "$size" "$note" >&2
    fi
}

# measure_peer ROW SIZE LOG CMD...: starts CMD, waits until frames arrive,
# WARMUP, then counts the receiver over DURATION seconds, then stops CMD.
# Sets PEER_FAIL to the failure reason (empty on success).
measure_peer() {
    local row=$1 size=$2 log=$3; shift 3
    local cmd="$*" pid c0 c1 n0 n1 first i
    PEER_FAIL=
    PEER_LOG=$log
    if ! prepare_row; then
        PEER_FAIL="could not pin the receiver's NAPI kthread"
        result "$row" "$size" na 0 0 0 0 0 "$PEER_FAIL" "$cmd"; return 0
    fi
    spawn "$log" "$@"
    pid=$SPAWNED
    # Wait (at most 15 s) for the first frames at the receiver.
    first=$(counters | awk '{print $2}')
    for i in $(seq 150); do
        alive "$pid" || break
        [ "$(counters | awk '{print $2}')" -gt "$first" ] && break
        sleep 0.1
    done
    if ! alive "$pid"; then
        wait "$pid" 2>/dev/null || true
        PEER_FAIL="exited before sending: $(first_error "$log")"
        result "$row" "$size" na 0 0 0 0 0 "$PEER_FAIL" "$cmd"; return 0
    fi
    sleep "$WARMUP"
    c0=$(counters); n0=$(napi_ticks)
    sleep "$DURATION"
    c1=$(counters); n1=$(napi_ticks)
    if ! alive "$pid"; then
        wait "$pid" 2>/dev/null || true
        PEER_FAIL="exited during the measurement: $(first_error "$log")"
        result "$row" "$size" na 0 0 0 0 0 "$PEER_FAIL" "$cmd"; return 0
    fi
    stop_group "$pid"
    set -- $c0 $c1
    local win rxf fps
    win=$(awk -v a="$1" -v b="$5" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    rxf=$(( $6 - $2 ))
    fps=$(awk -v n="$rxf" -v w="$win" 'BEGIN { printf "%.0f", n / w }')
    if [ "$rxf" -le 0 ]; then
        PEER_FAIL="no frames counted at the receiver"
        result "$row" "$size" na "$win" 0 0 0 0 "$PEER_FAIL" "$cmd"; return 0
    fi
    NAPI_NS=$(napi_ns "$n0" "$n1" "$rxf")
    result "$row" "$size" ok "$win" "$rxf" "$fps" $(( $7 - $3 )) $(( $8 - $4 )) "" "$cmd"
    NAPI_NS=NA
}

# --- the rows ----------------------------------------------------------------
row_trafgen() {
    local size=$1 len=$(( $1 - 4 )) payload=$(( $1 - 46 ))
    if [ -n "${MISSING[trafgen]:-}" ]; then result trafgen "$size" na 0 0 0 0 0 "${MISSING[trafgen]}" ""; return 0; fi
    local cfg=$SCRATCH/trafgen-$size.cfg
    cat >"$cfg" <<EOF
{
  eth(da=$(mac_of "$RX_NS" "$IF_RX"), sa=$(mac_of "$NS_TX" "$IF_TX"), type=0x0800),
  ipv4(saddr=198.18.0.2, daddr=198.18.0.3, ttl=64),
  udp(sp=19538, dp=19538),
  fill(0x00, $payload)
}
EOF
    # trafgen 0.6.8 dies on EAGAIN from sendto ("Flushing TX_RING failed:
    # Resource temporarily unavailable"), which the kernel returns once the
    # frames in flight exceed the socket's send buffer (wmem_default). trafgen
    # would raise that sysctl, but may not everywhere (--no-sock-mem: leave
    # the machine alone), so the TX ring is sized to fit the send buffer:
    # frames = sndbuf / (frame + 1 KiB overhead), a power of two, 2 KiB each.
    local sndbuf frames=16 try
    sndbuf=$(ip netns exec "$NS_TX" cat /proc/sys/net/core/wmem_default)
    while [ $(( frames * 2 * (len + 1024) )) -le "$sndbuf" ]; do frames=$(( frames * 2 )); done
    for try in 1 2 3; do
        measure_peer trafgen "$size" "$SCRATCH/trafgen-$size-r$ROUND.log" \
            ip netns exec "$NS_TX" taskset -c "$TX_CPUS" \
            trafgen --dev "$IF_TX" --conf "$cfg" --cpus "$THREADS" --no-sock-mem -Q -S "$(( frames * 2 ))KiB"
        if [ -n "$PEER_FAIL" ] && grep -q "Flushing TX_RING failed" "$PEER_LOG" && [ "$frames" -gt 16 ]; then
            frames=$(( frames / 2 ))
            echo "$ME: trafgen hit EAGAIN; retrying with a ${frames}-frame ring" >&2
            sed -i '$d' "$OUT"   # the retry replaces the failed row
        else
            return 0
        fi
    done
}

row_testpmd() {
    local pmd=$1 size=$2 row="testpmd $1"
    if [ -n "${MISSING[testpmd]:-}" ]; then result "$row" "$size" na 0 0 0 0 0 "${MISSING[testpmd]}" ""; return 0; fi
    if [ "$THREADS" != 1 ]; then result "$row" "$size" na 0 0 0 0 0 "one generator thread only in this script" ""; return 0; fi
    # Two lcores on the one generator CPU: lcore 0 (main: stats, signals)
    # mostly sleeps, lcore 1 forwards. --no-huge: no hugepage setup needed;
    # a small mbuf pool fits -m 256.
    measure_peer "$row" "$size" "$SCRATCH/testpmd-$pmd-$size-r$ROUND.log" \
        ip netns exec "$NS_TX" taskset -c "$TX_CPU" \
        dpdk-testpmd --lcores "0@$TX_CPU,1@$TX_CPU" --no-pci --no-huge -m 256 --no-shconf \
        --file-prefix "$DPDK_PREFIX" --vdev "net_${pmd}0,iface=$IF_TX" -- \
        --forward-mode=txonly --txpkts="$(( size - 4 ))" --eth-peer="0,$(mac_of "$RX_NS" "$IF_RX")" \
        --tx-ip=198.18.0.2,198.18.0.3 --tx-udp=19538,19538 --nb-cores=1 \
        --total-num-mbufs=16384 --stats-period 1
}

# xdp-trafficgen sends IPv6 UDP only: its smallest packet is 64 bytes in the
# buffer (a 68-byte frame with the FCS), so its 64-B row sends 68-byte frames
# (the report says so); the 1518-B row is exact. It runs the XDP program with
# live frames (BPF_PROG_RUN) on the generator CPU, like linerate's xdp engine.
row_xdp_trafficgen() {
    local size=$1 len
    len=$(( size - 4 < 64 ? 64 : size - 4 ))
    if [ -n "${MISSING[xdp-trafficgen]:-}" ]; then result xdp-trafficgen "$size" na 0 0 0 0 0 "${MISSING[xdp-trafficgen]}" ""; return 0; fi
    measure_peer xdp-trafficgen "$size" "$SCRATCH/xdp-trafficgen-$size-r$ROUND.log" \
        ip netns exec "$NS_TX" taskset -c "$TX_CPUS" \
        "$XDP_TRAFFICGEN" udp --dst-mac "$(mac_of "$RX_NS" "$IF_RX")" --src-mac "$(mac_of "$NS_TX" "$IF_TX")" \
        --pkt-size "$len" --threads "$THREADS" "$IF_TX"
}

# xdp-trafficgen's frames into `xdp-bench drop -p read-data` on the
# receiving veth: each frame read and dropped at the XDP hook, as
# linerate's counter does (which also parses, checks and counts it). The
# sink runs with the receiver's NAPI (its user space only polls counters).
row_xdp_sink() {
    local size=$1 len sink
    len=$(( size - 4 < 64 ? 64 : size - 4 ))
    if [ -n "${MISSING[xdp-bench]:-}" ]; then result "$XDP_SINK_ROW" "$size" na 0 0 0 0 0 "${MISSING[xdp-bench]}" ""; return 0; fi
    spawn "$SCRATCH/xdp-bench-$size-r$ROUND.log" ip netns exec "$RX_NS" taskset -c "$TX_CPU" \
        "$XDP_BENCH" drop -p read-data -i 10 "$IF_RX"
    sink=$SPAWNED
    sleep 1
    if ! alive "$sink"; then
        result "$XDP_SINK_ROW" "$size" na 0 0 0 0 0 "xdp-bench exited: $(first_error "$SCRATCH/xdp-bench-$size-r$ROUND.log")" ""
        return 0
    fi
    measure_peer "$XDP_SINK_ROW" "$size" "$SCRATCH/xdp-sink-$size-r$ROUND.log" \
        ip netns exec "$NS_TX" taskset -c "$TX_CPUS" \
        "$XDP_TRAFFICGEN" udp --dst-mac "$(mac_of "$RX_NS" "$IF_RX")" --src-mac "$(mac_of "$NS_TX" "$IF_TX")" \
        --pkt-size "$len" --threads "$THREADS" "$IF_TX"
    stop_group "$sink"
}

row_iperf3() {
    local size=$1 payload=$(( $1 - 46 )) srv
    if [ -n "${MISSING[iperf3]:-}" ]; then result "iperf3 -u" "$size" na 0 0 0 0 0 "${MISSING[iperf3]}" ""; return 0; fi
    if [ "$THREADS" != 1 ]; then result "iperf3 -u" "$size" na 0 0 0 0 0 "one generator thread only in this script" ""; return 0; fi
    spawn "$SCRATCH/iperf3-server-$size-r$ROUND.log" ip netns exec "$NS_RX" taskset -c "$TX_CPU" \
        iperf3 -s -1 -B 198.18.0.3 -p 5201
    srv=$SPAWNED
    sleep 0.5
    measure_peer "iperf3 -u" "$size" "$SCRATCH/iperf3-client-$size-r$ROUND.log" \
        ip netns exec "$NS_TX" taskset -c "$TX_CPU" \
        iperf3 -c 198.18.0.3 -p 5201 -u -b 0 -l "$payload" -t "$(( DURATION + 20 ))"
    stop_group "$srv"
}

linerate_args() { # SIZE ENGINE[/socket] DURATION JSON
    local a=(trial --port-a "$IF_TX" --port-b "$IF_RX"
        --ip-a 198.18.0.2/24 --gw-a 198.18.0.3 --ip-b 198.18.0.3/24 --gw-b 198.18.0.2
        --frame-size "$1" --rate 100% --line-speed "$LINE_SPEED" --duration "${3}s"
        --straggler-wait 200ms --engine "${2%/*}" --json "$4")
    [ "${2#*/}" = "$2" ] || a+=(--receiver "${2#*/}")
    [ -z "$TX_THREADS" ] || a+=(--tx-threads "$TX_THREADS")
    printf '%s\n' "${a[@]}"
}

row_linerate() {
    local engine=$1 size=$2 row="linerate $1" file=${1//\//-}
    local json=$SCRATCH/linerate-$file-$size-r$ROUND.json log=$SCRATCH/linerate-$file-$size-r$ROUND.log
    local args pid rc c0 c1 n0 n1
    mapfile -t args < <(linerate_args "$size" "$engine" "$DURATION" "$json")
    local cmd="ip netns exec $NS_TX taskset -c $TX_CPUS $LINERATE ${args[*]}"
    rm -f "$json"
    if ! prepare_row; then
        result "$row" "$size" na 0 0 0 0 0 "could not pin the receiver's NAPI kthread" "$cmd"; return 0
    fi
    c0=$(counters); n0=$(napi_ticks)
    spawn "$log" timeout -k 5 "$(( DURATION + 60 ))" ip netns exec "$NS_TX" taskset -c "$TX_CPUS" "$LINERATE" "${args[@]}"
    pid=$SPAWNED
    rc=0; wait "$pid" || rc=$?
    c1=$(counters); n1=$(napi_ticks)
    # Exit 1 only says the loss threshold (0 %) failed, as it must at 100 %.
    if { [ "$rc" = 0 ] || [ "$rc" = 1 ]; } && jq -e '.rx_frames and .duration_s' "$json" >/dev/null 2>&1; then
        local rxf dur fps sysfs
        # Over the time the frames really took (sending_s), never the
        # duration asked for: a generator below the rate sends for longer
        # (older binaries without sending_s: the frames over the offered
        # rate, which the engine counts over that time).
        rxf=$(jq -r .rx_frames "$json")
        dur=$(jq -r 'if .sending_s then .sending_s elif .offered_fps > 0 then .tx_frames / .offered_fps else .duration_s end' "$json")
        fps=$(awk -v n="$rxf" -v d="$dur" 'BEGIN { printf "%.0f", n / d }')
        set -- $c0 $c1
        sysfs=$(( $6 - $2 ))
        # Over the whole run (the kthread is idle outside the trial).
        NAPI_NS=$(napi_ns "$n0" "$n1" "$sysfs")
        result "$row" "$size" ok "$dur" "$rxf" "$fps" $(( $7 - $3 )) $(( $8 - $4 )) \
            "engine=$(jq -r .engine "$json") receiver=$(jq -r .receiver "$json") tx_frames=$(jq -r .tx_frames "$json") tester_rx_drops=$(jq -r .tester_rx_drops "$json") sysfs_rx_packets_whole_run=$sysfs" "$cmd"
        NAPI_NS=NA
    else
        local why
        if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then why="timed out"; else why=$(first_error "$log"); fi
        result "$row" "$size" na 0 0 0 0 0 "$why" "$cmd"
    fi
}

# Max RSS of one `linerate trial` of SECONDS s, in kB (GNU time, else VmHWM
# polling), written to $SCRATCH/mem-SECONDS.result.
max_rss() {
    local secs=$1 json=$SCRATCH/mem-$1.json log=$SCRATCH/mem-$1.log tfile=$SCRATCH/mem-$1.time
    local args pid rc hwm=0 v
    mapfile -t args < <(linerate_args 64 "$MEM_ENGINE" "$secs" "$json")
    prepare_row || true
    if [ -n "$GNU_TIME" ]; then
        # GNU time waits for linerate itself (ip netns exec and taskset exec it).
        spawn "$log" timeout -k 5 "$(( secs + 60 ))" "$GNU_TIME" -v -o "$tfile" \
            ip netns exec "$NS_TX" taskset -c "$TX_CPUS" "$LINERATE" "${args[@]}"
        pid=$SPAWNED
        rc=0; wait "$pid" || rc=$?
        v=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tfile" 2>/dev/null || true)
        hwm=${v:-0}
    else
        spawn "$log" ip netns exec "$NS_TX" taskset -c "$TX_CPUS" "$LINERATE" "${args[@]}"
        pid=$SPAWNED
        while alive "$pid"; do
            v=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
            [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
            sleep 0.1
        done
        rc=0; wait "$pid" || rc=$?
    fi
    # GNU time passes the command's exit code through.
    if { [ "$rc" = 0 ] || [ "$rc" = 1 ]; } && [ "$hwm" -gt 0 ]; then
        echo "$hwm" >"$SCRATCH/mem-$secs.result"
    else
        echo "n/a ($(first_error "$log"))" >"$SCRATCH/mem-$secs.result"
    fi
}

# run_row FALLBACK_ROW SIZE FUNCTION ARGS...: runs one measurement in a
# subshell of its own, in the background so that a signal reaches our trap at
# once; if it fails without writing its row, the row says so.
run_row() {
    local row=$1 size=$2 before p rc=0; shift 2
    before=$(wc -l <"$OUT")
    ( "$@" ) &
    p=$!
    echo "$p" >>"$PIDFILE"
    wait "$p" || rc=$?
    if [ "$rc" != 0 ] && [ -n "$row" ] && [ "$(wc -l <"$OUT")" = "$before" ]; then
        result "$row" "$size" na 0 0 0 0 0 "measurement failed (exit $rc; see stderr above)" ""
    fi
    return 0
}

# --- run ---------------------------------------------------------------------
START=$(date +%s)
echo "$ME: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -r), $NCPU CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$ME: $($LINERATE --version 2>/dev/null || echo 'linerate ?'); trafgen $(trafgen -v 2>/dev/null | awk 'NR==1 {print $2}'); iperf3 $(iperf3 -v 2>/dev/null | awk 'NR==1 {print $2}'); dpdk $(dpkg-query -W -f='${Version}' dpdk-dev 2>/dev/null || echo '?')"
echo "$ME: namespaces $NS_TX/$NS_RX, veth $IF_TX -> $IF_RX, MTU 1500, ${DURATION} s per row, raw results in $OUT"

setup_pair
echo "$ME: receiver NAPI kthread(s) $(ps -eo comm= | grep -E "^napi/$IF_RX(-|$)" | tr '\n' ' ')on CPU $(napi_cpus); generators on CPU(s) $TX_CPUS, $THREADS thread(s) each"
printf '%s\n' "$RESULT_COLS" >"$OUT"

for ROUND in $(seq "$ROUNDS"); do
    [ "$ROUNDS" = 1 ] || echo "$ME: round $ROUND of $ROUNDS" >&2
    for size in "${SIZES[@]}"; do
        run_row trafgen "$size" row_trafgen "$size"
        for pmd in af_packet af_xdp; do
            run_row "testpmd $pmd" "$size" row_testpmd "$pmd" "$size"
        done
        run_row xdp-trafficgen "$size" row_xdp_trafficgen "$size"
        run_row "$XDP_SINK_ROW" "$size" row_xdp_sink "$size"
        for engine in $ENGINES; do
            run_row "linerate $engine" "$size" row_linerate "$engine" "$size"
        done
    done
done
ROUND=1

echo "$ME: memory: linerate trial --engine $MEM_ENGINE for 2 s and for 10 s" >&2
run_row "" 0 max_rss 2
run_row "" 0 max_rss 10
MEM_SHORT=$(cat "$SCRATCH/mem-2.result" 2>/dev/null || echo "n/a (failed)")
MEM_LONG=$(cat "$SCRATCH/mem-10.result" 2>/dev/null || echo "n/a (failed)")

if split_pair; then
    for ROUND in $(seq "$ROUNDS"); do
        for size in "${SIZES[@]}"; do
            run_row "iperf3 -u" "$size" row_iperf3 "$size"
        done
    done
else
    for size in "${SIZES[@]}"; do result "iperf3 -u" "$size" na 0 0 0 0 0 "could not move the receiver to $NS_RX" ""; done
fi

# --- report ------------------------------------------------------------------
# field ROW SIZE COLUMN -> value from the TSV: of the round with the most
# frames/s (best of --rounds; interference only ever lowers a rate), else of
# the first (failed) round.
field() {
    awk -F'\t' -v r="$1" -v s="$2" -v c="$3" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 == r && $2 == s {
            if (first == "") first = $col[c]
            if ($col["status"] == "ok" && (best == "" || $col["fps"] + 0 > bestfps)) { best = $col[c]; bestfps = $col["fps"] + 0 }
        }
        END { print (best != "" ? best : first) }' "$OUT"
}
# rounds ROW SIZE -> Mpps of every round, in order ("n/a" for a failed one)
rounds() {
    awk -F'\t' -v r="$1" -v s="$2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 == r && $2 == s { out = out sep ($col["status"] == "ok" ? sprintf("%.3f", $col["mpps"]) : "n/a"); sep = " " }
        END { print out }' "$OUT"
}
cell_mpps() { local st; st=$(field "$1" "$2" status); if [ "$st" = ok ]; then printf '%.3f' "$(field "$1" "$2" mpps)"; else printf 'n/a'; fi; }
cell_drops() { local st; st=$(field "$1" "$2" status); if [ "$st" = ok ]; then printf '%s/%s' "$(field "$1" "$2" rx_dropped)" "$(field "$1" "$2" sender_tx_dropped)"; else printf -- '-'; fi; }
ratio() { # A B -> A/B at 64 B, or n/a
    local a b
    [ "$(field "$1" 64 status)" = ok ] && [ "$(field "$2" 64 status)" = ok ] || { echo "n/a"; return; }
    a=$(field "$1" 64 fps); b=$(field "$2" 64 fps)
    awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'
}

ROWS=(trafgen "testpmd af_packet" "testpmd af_xdp" xdp-trafficgen "$XDP_SINK_ROW" "iperf3 -u")
for e in $ENGINES; do ROWS+=("linerate $e"); done

echo
best=; [ "$ROUNDS" = 1 ] || best=", best of $ROUNDS rounds"
echo "Frames/s counted at the receiving veth, ${DURATION} s per row$best; generators on CPU(s) $TX_CPUS ($THREADS thread(s) each), receiver (threaded NAPI) on CPU $RX_CPU"
printf '%-25s %10s %12s %15s %18s %18s\n' "tool / engine" "64 B Mpps" "1518 B Mpps" "1518 B Gbps L2" "drops 64 B" "drops 1518 B"
for r in "${ROWS[@]}"; do
    gbps=n/a
    [ "$(field "$r" 1518 status)" = ok ] && gbps=$(printf '%.2f' "$(field "$r" 1518 gbps_l2)")
    notes=$(awk -F'\t' -v r="$r" 'NR > 1 && $1 == r && $4 != "ok" { print $13 }' "$OUT" | awk '!seen[$0]++' | paste -sd';' - | sed 's/;/; /g')
    printf '%-25s %10s %12s %15s %18s %18s' "$r" "$(cell_mpps "$r" 64)" "$(cell_mpps "$r" 1518)" "$gbps" "$(cell_drops "$r" 64)" "$(cell_drops "$r" 1518)"
    [ -z "$notes" ] || printf '  n/a (%s)' "$notes"
    printf '\n'
done
[ "$(field xdp-trafficgen 64 status)" != ok ] || echo "(xdp-trafficgen's 64 B row: 68-byte frames, its smallest: it sends IPv6 UDP only)"
echo "(drops: receiver rx_dropped / sender veth tx_dropped over the counted window: frames the receiver's ring refused;"
echo " veth counts a refused frame sent by XDP in both, one sent by a socket only in tx_dropped)"
if [ "$ROUNDS" != 1 ]; then
    echo
    echo "Every round, Mpps (64 B | 1518 B):"
    for r in "${ROWS[@]}"; do printf '  %-25s %s | %s\n' "$r" "$(rounds "$r" 64)" "$(rounds "$r" 1518)"; done
fi
# napi_med ROW SIZE: median over rounds of the receiving CPU's NAPI time per frame.
napi_med() {
    awk -F'\t' -v r="$1" -v s="$2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 == r && $2 == s && $col["status"] == "ok" && $col["napi_ns_per_frame"] ~ /^[0-9]+$/ { v[++n] = $col["napi_ns_per_frame"] + 0 }
        END {
            if (n == 0) { print "n/a"; exit }
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            printf "%d", (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }' "$OUT"
}
echo
echo "Receiving CPU per frame: NAPI kthread CPU time / frames received, ns (64 B | 1518 B)${best:+, median of rounds}:"
for r in "${ROWS[@]}"; do printf '  %-25s %6s | %6s\n' "$r" "$(napi_med "$r" 64)" "$(napi_med "$r" 1518)"; done

best_peer=; best_fps=0
for p in trafgen "testpmd af_packet" "testpmd af_xdp" xdp-trafficgen "$XDP_SINK_ROW" "iperf3 -u"; do
    if [ "$(field "$p" 64 status)" = ok ]; then
        f=$(field "$p" 64 fps)
        if [ "$f" -gt "$best_fps" ]; then best_fps=$f; best_peer=$p; fi
    fi
done
# per_round A B: A/B at 64 B within each round (rows measured close together
# share more of the machine's load than best-of rounds do), then the median.
# B "PEERS" means the best peer of that round.
per_round() {
    awk -F'\t' -v a="$1" -v b="$2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $2 == 64 && $col["status"] == "ok" {
            r = $col["round"]; f = $col["fps"] + 0; rounds[r] = 1
            if ($1 == a) fa[r] = f
            if (b == "PEERS" && ($1 == "trafgen" || $1 ~ /^testpmd / || $1 ~ /^xdp-trafficgen/ || $1 == "iperf3 -u")) { if (f > fb[r]) fb[r] = f }
            else if ($1 == b) fb[r] = f
        }
        END {
            n = 0; out = ""
            for (r = 1; r in rounds; r++) {
                if ((r in fa) && fb[r] > 0) { v[++n] = fa[r] / fb[r]; out = out sprintf(" %.2f", v[n]) } else out = out " n/a"
            }
            if (n == 0) { print "n/a"; exit }
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            printf "per round:%s  median %.2f", out, med
        }' "$OUT"
}
ratio_line() { # LABEL A B [B for per_round]
    if [ "$ROUNDS" = 1 ]; then
        printf '  %-48s %s\n' "$1" "$(ratio "$2" "$3")"
    else
        printf '  %-48s %-6s %s\n' "$1" "$(ratio "$2" "$3")" "$(per_round "$2" "${4:-$3}")"
    fi
}
echo
if [ "$ROUNDS" = 1 ]; then
    echo "Ratios at 64 B (frames/s at the receiver):"
else
    echo "Ratios at 64 B (frames/s at the receiver): of the best rounds; within each round, and their median:"
fi
ratio_line "linerate af_packet / trafgen" "linerate af_packet" trafgen
ratio_line "linerate af_packet / testpmd af_packet" "linerate af_packet" "testpmd af_packet"
ratio_line "linerate af_xdp / testpmd af_xdp" "linerate af_xdp" "testpmd af_xdp"
# The same engines counting through their own sockets (--receiver socket).
case " $ENGINES " in *" af_packet/socket "*)
    ratio_line "linerate af_packet/socket / trafgen" "linerate af_packet/socket" trafgen ;;
esac
case " $ENGINES " in *" af_xdp/socket "*)
    ratio_line "linerate af_xdp/socket / testpmd af_xdp" "linerate af_xdp/socket" "testpmd af_xdp" ;;
esac
# Both XDP generators outrun the receiving CPU: the veth's ring refuses most
# of their frames (counted in the sending veth's tx_dropped), so what each
# generated is the frames received plus those refused, over the window.
gen_fps() { # ROW SIZE -> frames generated per second, or empty
    [ "$(field "$1" "$2" status)" = ok ] || return 0
    awk -v n="$(field "$1" "$2" rx_frames)" -v d="$(field "$1" "$2" sender_tx_dropped)" -v w="$(field "$1" "$2" window_s)" \
        'BEGIN { if (w > 0) printf "%.0f", (n + d) / w }'
}
xdp_gen_line() {
    local a b
    a=$(gen_fps "linerate xdp" 64); b=$(gen_fps "$XDP_SINK_ROW" 64)
    [ -n "$b" ] || b=$(gen_fps xdp-trafficgen 64)
    if [ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt 0 ]; then
        printf '  %-48s %s  (%s / %s Mframes/s generated: received + refused by the receiver'"'"'s ring)\n' \
            "linerate xdp / xdp-trafficgen, generated" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')" \
            "$(awk -v a="$a" 'BEGIN { printf "%.2f", a / 1e6 }')" "$(awk -v b="$b" 'BEGIN { printf "%.2f", b / 1e6 }')"
    else
        printf '  %-48s %s\n' "linerate xdp / xdp-trafficgen, generated" "n/a"
    fi
}
ratio_line "linerate xdp / xdp-trafficgen, received" "linerate xdp" xdp-trafficgen
ratio_line "linerate xdp / xdp-trafficgen -> xdp-bench" "linerate xdp" "$XDP_SINK_ROW"
xdp_gen_line
if [ -n "$best_peer" ]; then
    ratio_line "linerate xdp / best peer ($best_peer)" "linerate xdp" "$best_peer" PEERS
else
    printf '  %-48s %s\n' "linerate xdp / best peer" "n/a"
fi

echo
fmt_kb() { if [[ $1 =~ ^[0-9]+$ ]]; then printf '%s kB' "$1"; else printf '%s' "$1"; fi; }
mem_ratio=n/a
if [[ $MEM_SHORT =~ ^[0-9]+$ ]] && [[ $MEM_LONG =~ ^[0-9]+$ ]]; then
    mem_ratio=$(awk -v a="$MEM_LONG" -v b="$MEM_SHORT" 'BEGIN { printf "%.2f", a / b }')
fi
echo "Memory: max RSS of 'linerate trial --engine $MEM_ENGINE' (64 B, 100 %): 2 s $(fmt_kb "$MEM_SHORT"), 10 s $(fmt_kb "$MEM_LONG") (10 s / 2 s = $mem_ratio)"
printf 'engine\tmax_rss_kb_2s\tmax_rss_kb_10s\tmeasured_with\n%s\t%s\t%s\t%s\n' "$MEM_ENGINE" "$MEM_SHORT" "$MEM_LONG" "${GNU_TIME:-VmHWM}" >"$OUT.memory"
echo
echo "$ME: done in $(( $(date +%s) - START )) s, load $(cut -d' ' -f1-3 /proc/loadavg); raw results: $OUT (memory: $OUT.memory, tool logs: $OUT.logs/)"
