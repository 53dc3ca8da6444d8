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
# strongSwan's own initiator against the same responder, one row per
# proposal and count ("(charon)" in the IKE column): charon
# (kernel-libipsec, no routes installed) in the peer namespace with one
# connection per tunnel (tunnel i from 10.78.0.1 + i, its own /32 of
# 198.18.0.0/16), each started as swanctl --load-conns loads it
# (start_action = start; strongSwan 5.9 here has no load-tester plugin or
# charon-cmd). Measured the same way, first IKE_SA_INIT to last CHILD_SA,
# on the wire: a packet socket on the responder's veth stamps the first
# IKE_SA_INIT request and the last IKE_AUTH answer (charon installs the
# CHILD_SA as it reads it; its log stamps whole seconds only);
# established is what swanctl --list-sas lists INSTALLED; per-tunnel
# setup times are not measured ("-"); RSS is charon's. When charon,
# swanctl, its kernel-libipsec plugin or python3 is missing the script
# says so in one line instead (--no-strongswan: leave the rows out).
#
# Tools: ip, cargo (unless --no-build); python3, strongSwan's charon and
# swanctl for charon's rows. Installs nothing.
#
# Usage (root):  scripts/bench-tunnels.sh [--counts "1 1000 10000"]
#                    [--groups "x25519 ecp256"] [--window 256] [--no-build]
#                    [--no-strongswan]
# LOAD_LIMIT=S (default 180): a charon row that has not loaded and brought
# up its connections after S seconds gives up (its tunnels/s "-").
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
COMMAND="$0${*:+ $*}"
COUNTS="1 1000 10000"
GROUPS_="x25519 ecp256"
WINDOW=256
BUILD=1
STRONGSWAN=1
CARGO=${CARGO:-cargo}
# Seconds a charon row may take to load its connections and bring them up.
LOAD_LIMIT=${LOAD_LIMIT:-180}

while [ $# -gt 0 ]; do
    case "$1" in
        --counts) COUNTS=$2; shift 2 ;;
        --groups) GROUPS_=$2; shift 2 ;;
        --window) WINDOW=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --no-strongswan) STRONGSWAN=0; shift ;;
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
CHARON_PID=
# stop PID: SIGTERM, and SIGKILL if it is still there 3 s later (charon
# busy loading thousands of connections does not stop at once).
stop() {
    local i
    kill "$1" 2>/dev/null || return 0
    for i in $(seq 30); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
cleanup() {
    [ -z "$RESPONDER" ] || stop "$RESPONDER"
    [ -z "$CHARON_PID" ] || stop "$CHARON_PID"
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

# strongSwan's charon as the initiator: why it cannot run, or nothing.
charon_missing() {
    [ "$STRONGSWAN" = 1 ] || { echo "left out (--no-strongswan)"; return; }
    CHARON=$(ls /usr/lib/ipsec/charon /usr/libexec/ipsec/charon 2>/dev/null | head -1 || true)
    [ -n "$CHARON" ] || { echo "strongSwan's charon is not installed (scripts/setup.sh installs it)"; return; }
    command -v swanctl >/dev/null || { echo "swanctl is not installed (scripts/setup.sh installs it)"; return; }
    local plugin found=
    for plugin in /usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so /usr/lib/*/ipsec/plugins/libstrongswan-kernel-libipsec.so; do
        [ -e "$plugin" ] && found=1
    done
    [ -n "$found" ] || { echo "charon's kernel-libipsec plugin is missing (libcharon-extra-plugins; charon needs it where the kernel has no ESP)"; return; }
    command -v python3 >/dev/null || { echo "python3 is missing (it stamps the IKE packets on the wire)"; return; }
}

# The wire clock on the responder's veth: the first IKE_SA_INIT request and
# the last IKE_AUTH answer (one per initiator SPI), until COUNT answers or
# 10 s without an IKE packet. Prints "ready", then
# "first=S last=S answered=N".
cat > "$DIR/stamp.py" <<'PY'
import socket, struct, sys, time
count, ifname = int(sys.argv[1]), sys.argv[2]
# ETH_P_ALL: a socket of one protocol sees only what comes in, not the
# answers going out.
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
s.bind((ifname, 0))
s.settimeout(10)
print("ready", flush=True)
first, last, answered = None, None, set()
while len(answered) < count:
    try:
        frame = s.recv(65535)
    except socket.timeout:
        break
    now = time.time()
    ip = frame[14:]
    if frame[12:14] != b"\x08\x00" or len(ip) < 28 or ip[9] != 17:
        continue
    udp = ip[(ip[0] & 15) * 4:]
    sport, dport = struct.unpack("!HH", udp[:4])
    ike = udp[8:]
    if 4500 in (sport, dport):
        if ike[:4] != b"\0\0\0\0":
            continue
        ike = ike[4:]
    elif 500 not in (sport, dport):
        continue
    if len(ike) < 28:
        continue
    exchange, response = ike[18], ike[19] & 0x20
    if exchange == 34 and not response and first is None:
        first = now
    elif exchange == 35 and response:
        answered.add(ike[:8])
        last = now
print("first=%s last=%s answered=%d" % (first, last, len(answered)), flush=True)
PY

# charon's configuration for COUNT tunnels with the proposal GROUP, in
# directory CDIR (the key from $DIR/psk; the file is private).
charon_conf() {
    local cdir=$1 group=$2 count=$3 i
    cat > "$cdir/strongswan.conf" <<CONF
charon {
  load = random nonce openssl kdf aes sha1 sha2 hmac gcm pem pkcs1 pubkey kernel-libipsec kernel-netlink socket-default vici
  install_routes = no
  install_virtual_ip = no
  plugins {
    vici {
      socket = unix:///run/charon.vici
    }
  }
}
CONF
    (
        umask 077
        echo "connections {"
        for ((i = 0; i < count; i++)); do
            printf '  t%d {\n    version = 2\n    local_addrs = 10.78.%d.%d\n    remote_addrs = 10.77.0.1\n    proposals = aes128-sha256-%s\n' \
                "$i" $(((i + 1) / 256)) $(((i + 1) % 256)) "$group"
            printf '    local {\n      auth = psk\n    }\n    remote {\n      auth = psk\n    }\n'
            printf '    children {\n      c {\n        local_ts = 198.18.%d.%d/32\n        remote_ts = 198.19.0.0/24\n        esp_proposals = aes128gcm16\n        start_action = start\n      }\n    }\n  }\n' \
                $((i / 256)) $((i % 256))
        done
        echo "}"
        # The key as the responder reads its file: the text itself.
        printf 'secrets {\n  ike-bench {\n    secret = "%s"\n  }\n}\n' "$(cat "$DIR/psk")"
    ) > "$cdir/swanctl.conf"
}

# One strongSwan row: charon initiates COUNT tunnels with the proposal
# GROUP against a fresh responder.
charon_row() {
    local group=$1 count=$2 cdir="$DIR/charon" i
    rm -rf "$cdir"
    mkdir -m 700 "$cdir"
    charon_conf "$cdir" "$group" "$count"
    # Each tunnel's outer address and (for kernel-libipsec's route into its
    # TUN device, whose source must be local) its inner one.
    for ((i = 0; i < count; i++)); do
        echo "addr add 10.78.$(((i + 1) / 256)).$(((i + 1) % 256))/32 dev lo"
        echo "addr add 198.18.$((i / 256)).$((i % 256))/32 dev lo"
    done | ip -n "$PEER" -force -batch - 2>/dev/null || true
    ip netns exec "$GW" "$BIN" respond --local 10.77.0.1 --psk-file "$DIR/psk" 2>/dev/null &
    RESPONDER=$!
    # `ip netns exec` gives charon a mount namespace of its own: there the
    # private directory becomes /run, for this charon only.
    ip netns exec "$PEER" sh -c 'mount --bind "$1" /run && STRONGSWAN_CONF=/run/strongswan.conf exec "$2"' \
        sh "$cdir" "$CHARON" >/dev/null 2>&1 &
    CHARON_PID=$!
    local uri="unix://$cdir/charon.vici" waited=0 rss0 rss1 stamps ready established
    while [ ! -S "$cdir/charon.vici" ] && [ "$waited" -lt 100 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    swanctl --load-creds --noprompt --file "$cdir/swanctl.conf" --uri "$uri" >/dev/null 2>&1 || true
    rss0=$(awk '/VmRSS/ { print $2 }' "/proc/$CHARON_PID/status" 2>/dev/null || echo 0)
    exec 3< <(ip netns exec "$GW" python3 "$DIR/stamp.py" "$count" gw0)
    local stamper=$!
    read -r ready <&3 || true
    # charon loads thousands of connections slowly (over 8 minutes for
    # 10,000 on the 2-CPU VM): a row gives up after LOAD_LIMIT seconds.
    timeout "$LOAD_LIMIT" swanctl --load-conns --file "$cdir/swanctl.conf" --uri "$uri" >/dev/null 2>&1 &
    local loader=$!
    read -t "$LOAD_LIMIT" -r stamps <&3 || stamps="first=None last=None"
    exec 3<&-
    # The stamper waits for every tunnel's answer: gone when they all came.
    stop "$stamper"
    wait "$loader" 2>/dev/null || true
    rss1=$(awk '/VmRSS/ { print $2 }' "/proc/$CHARON_PID/status" 2>/dev/null || echo 0)
    established=$(swanctl --list-sas --uri "$uri" 2>/dev/null | grep -c ', INSTALLED, ' || true)
    stop "$CHARON_PID"
    CHARON_PID=
    stop "$RESPONDER"
    RESPONDER=
    ip -n "$PEER" -4 addr flush dev lo scope global 2>/dev/null || true
    get() { echo "$stamps" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
    printf '| aes128-sha256-%s (charon) | %s | %s | %s | %s | - | - | %s | %s |\n' \
        "$group" "$count" "$established" "$((count - established))" \
        "$(awk -v n="$established" -v a="$(get first)" -v b="$(get last)" \
            'BEGIN { if (a == "None" || b == "None" || a == "" || b + 0 <= a + 0) print "-"; else printf "%.0f", n / (b - a) }')" \
        "$(awk -v k="$rss1" 'BEGIN { printf "%.1f", k / 1024 }')" \
        "$(awk -v a="$rss0" -v b="$rss1" -v n="$count" 'BEGIN { printf "%.1f", (b - a) / n }')"
}

why=$(charon_missing)
if [ -z "$why" ]; then
    CHARON=$(ls /usr/lib/ipsec/charon /usr/libexec/ipsec/charon 2>/dev/null | head -1 || true)
    for group in $GROUPS_; do
        for count in $COUNTS; do
            charon_row "$group" "$count"
        done
    done
else
    echo
    echo "strongSwan's initiator: not measured: $why"
fi
echo
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
