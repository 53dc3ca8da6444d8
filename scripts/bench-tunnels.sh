#!/usr/bin/env bash
# bench-tunnels.sh - IKEv2 tunnel setup rate and memory of linerate's fleet
# (crates/ike, ike::Fleet: one thread, one pair of sockets) against
# linerate's own responder (ike::Responder), back to back: no gateway limit,
# so the figures are linerate's own ceiling. A benchmark, not a timed test.
#
#   rows     IKE proposal (aes128-sha256-x25519, aes128-sha256-ecp256) x
#            tunnel count (1, 1000, 10000)
#   columns  established, failed, tunnels per second (established / time
#            from the first IKE_SA_INIT sent to the last CHILD_SA
#            installed), setup time p50/p99 (IKE_SA_INIT sent to CHILD_SA
#            installed, per tunnel), the initiator process's resident memory
#            with every tunnel up and per tunnel above its baseline
#
# Two namespaces lrtun-<pid>-gw (the responder, 10.77.0.1) and
# lrtun-<pid>-peer (the fleet) joined by a veth pair; 10.78.0.0/16 is local
# in the peer namespace (a local route on lo) and routed to it from the
# gateway's: tunnel i comes from 10.78.0.1 + i. Both are removed on exit,
# error and Ctrl-C. The pre-shared key is random, in a 0600 file, never on a
# command line. The responder and the fleet each run on one thread (two
# processes); on a shared machine other work moves the figures, so publish
# only figures from a quiet run.
#
# Tools: ip, cargo (unless --no-build). Installs nothing.
#
# Usage (root):  scripts/bench-tunnels.sh [--counts "1 1000 10000"]
#                    [--groups "x25519 ecp256"] [--window 256] [--no-build]
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
COMMAND="$0${*:+ $*}"
COUNTS="1 1000 10000"
GROUPS_="x25519 ecp256"
WINDOW=256
BUILD=1
CARGO=${CARGO:-cargo}

while [ $# -gt 0 ]; do
    case "$1" in
        --counts) COUNTS=$2; shift 2 ;;
        --groups) GROUPS_=$2; shift 2 ;;
        --window) WINDOW=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-tunnels: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ "$(id -u)" != 0 ]; then
    echo "bench-tunnels: needs root (network namespaces, ports 500/4500): run it with sudo" >&2
    exit 2
fi

if [ "$BUILD" = 1 ]; then
    (cd "$REPO" && "$CARGO" build --release --locked -p linerate-ike --example tunnel_rate >&2)
fi
BIN="$REPO/target/release/examples/tunnel_rate"
[ -x "$BIN" ] || { echo "bench-tunnels: $BIN is missing: run without --no-build" >&2; exit 2; }

GW=lrtun-$$-gw
PEER=lrtun-$$-peer
DIR=$(mktemp -d /tmp/lrtun-$$.XXXXXX)
RESPONDER=
cleanup() {
    [ -n "$RESPONDER" ] && kill "$RESPONDER" 2>/dev/null && wait "$RESPONDER" 2>/dev/null
    ip netns del "$GW" 2>/dev/null || true
    ip netns del "$PEER" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$GW"
ip netns add "$PEER"
ip -n "$GW" link set lo up
ip -n "$PEER" link set lo up
ip -n "$GW" link add gw0 type veth peer name peer0 netns "$PEER"
ip -n "$GW" addr add 10.77.0.1/24 dev gw0
ip -n "$PEER" addr add 10.77.0.2/24 dev peer0
ip -n "$GW" link set gw0 up
ip -n "$PEER" link set peer0 up
ip -n "$PEER" route add local 10.78.0.0/16 dev lo
ip -n "$GW" route add 10.78.0.0/16 via 10.77.0.2

(umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DIR/psk")

echo "Command: $COMMAND"
echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| IKE | tunnels | established | failed | tunnels/s | setup p50 ms | setup p99 ms | RSS up MiB | RSS/tunnel KiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for group in $GROUPS_; do
    for count in $COUNTS; do
        # A fresh responder per row: its memory and tables start empty.
        ip netns exec "$GW" "$BIN" respond --local 10.77.0.1 --psk-file "$DIR/psk" 2>/dev/null &
        RESPONDER=$!
        sleep 0.3
        line=$(ip netns exec "$PEER" "$BIN" initiate --gateway 10.77.0.1 --psk-file "$DIR/psk" \
            --first 10.78.0.1 --count "$count" --ike "aes128-sha256-$group" --window "$WINDOW") || true
        kill "$RESPONDER" 2>/dev/null; wait "$RESPONDER" 2>/dev/null || true
        RESPONDER=
        get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
        rss_up=$(get rss_up_kib)
        printf '| aes128-sha256-%s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
            "$group" "$count" "$(get established)" "$(get failed)" "$(get tunnels_per_s)" \
            "$(get setup_ms_p50)" "$(get setup_ms_p99)" \
            "$(awk -v k="${rss_up:-0}" 'BEGIN { printf "%.1f", k / 1024 }')" \
            "$(get rss_per_tunnel_kib)"
    done
done
echo
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
