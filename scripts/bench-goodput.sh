#!/usr/bin/env bash
# bench-goodput.sh - `linerate tcp` against `iperf3 -P 5`, and `linerate http`
# against nginx + wrk, in ONE run over the SAME lab path (a lab this script
# builds, tester A -> Linux router -> tester B), with ratios linerate/peer.
#
#   tcp       linerate tcp -P 5 --window 256k  vs  iperf3 -c -P 5 -w 256K
#             (download: B sends to A, iperf3 -R; upload: A sends to B);
#             figure: L4 goodput at the receiver (iperf3: sum_received)
#   http      linerate http (built-in hyper server on B, 5 clients on A)
#             vs nginx on B + wrk -c 5 on A; and, to compare the clients
#             alone, linerate http --server nginx vs the same nginx + wrk.
#             Objects of --object-size bytes, GET (download).
#             Figure: body Mbps (linerate) and wrk's Transfer/sec (body +
#             headers, a few hundred bytes per object: < 0.1 % at 1 MiB)
#
# Every row runs pinned to the lab's tester CPU(s) (taskset; the lab keeps
# the DUT's forwarding on its own CPU), so linerate and its peer have the
# same CPU budget. The rows are interleaved over --rounds rounds; a ratio is
# taken within each round (rows a few seconds apart see the same load) and
# the median of those ratios is printed, as veth paths on a shared machine
# drift by tens of per cent between minutes. Target: every ratio >= 0.95.
#
# Tools: ip, jq, iperf3, nginx, wrk (Debian iperf3, nginx-light, wrk;
# scripts/setup.sh installs them best effort). A row whose tool is missing
# prints n/a.
#
# Usage (root): scripts/bench-goodput.sh [--duration S] [--rounds N]
#                   [--object-size 1M] [--linerate PATH] [--cpus LIST]
set -euo pipefail

ME=bench-goodput
REPO=$(cd "$(dirname "$0")/.." && pwd)
DURATION=10
ROUNDS=3
OBJECT=1M
LINERATE=${LINERATE:-$REPO/target/release/linerate}
CPUS=

while [ $# -gt 0 ]; do
    case "$1" in
        --duration) DURATION=${2%s}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --object-size) OBJECT=${2:?}; shift 2 ;;
        --linerate) LINERATE=${2:?}; shift 2 ;;
        --cpus) CPUS=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "$ME: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "$ME: run as root (it builds a lab)" >&2; exit 2; }
[ -x "$LINERATE" ] || { echo "$ME: no linerate at $LINERATE: cargo build --release" >&2; exit 2; }
case "$OBJECT" in
    *k|*K) BYTES=$(( ${OBJECT%?} * 1024 )) ;;
    *m|*M) BYTES=$(( ${OBJECT%?} * 1048576 )) ;;
    *) BYTES=$OBJECT ;;
esac

LAB=bg$$
A=lr-$LAB-a
B=lr-$LAB-b
TMP=$(mktemp -d /tmp/$ME.XXXXXX)
NGINX_PID=
cleanup() {
    [ -z "$NGINX_PID" ] || kill "$NGINX_PID" 2>/dev/null || true
    peers_down 2>/dev/null || true
    "$LINERATE" lab down --lab-name "$LAB" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT

# Kernel addresses for the peers, as linerate adds them for its own runs
# (the lab's testers have none), removed again after each peer row.
peers_up() {
    ip -n "$A" addr add 198.18.0.2/24 dev a0
    ip -n "$A" route add 198.19.0.2/32 via 198.18.0.1
    ip -n "$B" addr add 198.19.0.2/24 dev b0
    ip -n "$B" route add 198.18.0.2/32 via 198.19.0.1
}
peers_down() {
    ip -n "$A" addr del 198.18.0.2/24 dev a0 2>/dev/null || true
    ip -n "$B" addr del 198.19.0.2/24 dev b0 2>/dev/null || true
}

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

"$LINERATE" lab up --lab-name "$LAB" >/dev/null
# The tester CPUs the lab chose ("tester on CPU 0" / "CPUs 0, 2").
if [ -z "$CPUS" ]; then
    CPUS=$("$LINERATE" lab status | awk -v n="lab $LAB " 'index($0, n) == 1 { f = 1 } f && /placement:/ { print; exit }' |
        grep -o 'tester on CPUs\{0,1\} [0-9, ]*[0-9]' | sed 's/tester on CPUs\{0,1\} //; s/ //g' || true)
fi
PIN=()
[ -z "$CPUS" ] || PIN=(taskset -c "$CPUS")
echo "$ME: lab $LAB (namespaces $A, lr-$LAB-dut, $B), $DURATION s per row, $ROUNDS round(s), objects $OBJECT, tools on CPU(s) ${CPUS:-any}"

lr_tcp() { # direction -> Mbps
    "${PIN[@]}" "$LINERATE" tcp --lab --lab-name "$LAB" -P 5 --window 256k --duration "${DURATION}s" \
        --direction "$1" --json "$TMP/tcp.json" >/dev/null
    jq '.runs[0].goodput_bps / 1e6' "$TMP/tcp.json"
}
iperf_tcp() { # direction -> Mbps
    have iperf3 || { echo n/a; return; }
    local rev=""
    [ "$1" = download ] && rev=-R
    peers_up
    ip netns exec "$B" "${PIN[@]}" iperf3 -s -1 -B 198.19.0.2 >/dev/null 2>&1 &
    local srv=$!
    # iperf3 -s -1 serves one test: wait for its port with ss, not a probe.
    for _ in $(seq 100); do
        ip netns exec "$B" ss -ltn 2>/dev/null | grep -q ':5201 ' && break
        sleep 0.1
    done
    ip netns exec "$A" "${PIN[@]}" iperf3 -c 198.19.0.2 -P 5 -w 256K -t "$DURATION" $rev -J >"$TMP/iperf.json" || true
    wait "$srv" 2>/dev/null || true
    peers_down
    jq '.end.sum_received.bits_per_second / 1e6' "$TMP/iperf.json"
}
lr_http() { # server (builtin|nginx) -> Mbps
    "${PIN[@]}" "$LINERATE" http --lab --lab-name "$LAB" --clients 5 --object-size "$OBJECT" \
        --duration "${DURATION}s" --server "$1" --json "$TMP/http.json" >/dev/null
    jq '.runs[0].goodput_bps / 1e6' "$TMP/http.json"
}
nginx_wrk() { # -> Mbps (wrk Transfer/sec)
    have nginx && have wrk || { echo n/a; return; }
    mkdir -p "$TMP/ng/www"
    head -c "$BYTES" /dev/zero >"$TMP/ng/www/$BYTES"
    # The same configuration linerate writes for --server nginx.
    cat >"$TMP/ng/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes auto;
user root root;
pid $TMP/ng/nginx.pid;
error_log $TMP/ng/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    client_body_temp_path $TMP/ng/body;
    server { listen 198.19.0.2:8080; root $TMP/ng/www; location / { } }
}
EOF
    peers_up
    ip netns exec "$B" "${PIN[@]}" nginx -p "$TMP/ng" -c "$TMP/ng/nginx.conf" -e "$TMP/ng/error.log" &
    NGINX_PID=$!
    # Wait until nginx accepts connections (a loaded machine may take seconds).
    for _ in $(seq 100); do
        ip netns exec "$A" bash -c 'exec 3<>/dev/tcp/198.19.0.2/8080' 2>/dev/null && break
        sleep 0.1
    done
    ip netns exec "$A" "${PIN[@]}" wrk -t 2 -c 5 -d "${DURATION}s" "http://198.19.0.2:8080/$BYTES" >"$TMP/wrk.txt" || true
    kill "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=
    peers_down
    # "Transfer/sec:      1.10GB" (binary units) -> Mbps
    awk '/Transfer\/sec/ {
        v = $2; u = substr(v, length(v) - 1); n = substr(v, 1, length(v) - 2) + 0
        m = (u == "GB") ? 1073741824 : (u == "MB") ? 1048576 : (u == "KB") ? 1024 : 1
        printf "%.1f\n", n * m * 8 / 1e6 }' "$TMP/wrk.txt"
}

rows=(lr_tcp_down iperf_tcp_down lr_tcp_up iperf_tcp_up lr_http_builtin lr_http_nginx nginx_wrk)
# ratio name -> "linerate row, peer row"
declare -A pairs=(
    [tcp_download]="lr_tcp_down iperf_tcp_down"
    [tcp_upload]="lr_tcp_up iperf_tcp_up"
    [http_all]="lr_http_builtin nginx_wrk"
    [http_clients]="lr_http_nginx nginx_wrk"
)
ratio() {
    { [ "$1" = n/a ] || [ "$2" = n/a ]; } && { echo n/a; return; }
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'
}
declare -A values ratios
for round in $(seq 1 "$ROUNDS"); do
    declare -A this=()
    for row in "${rows[@]}"; do
        case $row in
            lr_tcp_down) v=$(lr_tcp download) ;;
            iperf_tcp_down) v=$(iperf_tcp download) ;;
            lr_tcp_up) v=$(lr_tcp upload) ;;
            iperf_tcp_up) v=$(iperf_tcp upload) ;;
            lr_http_builtin) v=$(lr_http builtin) ;;
            lr_http_nginx) v=$(have nginx && lr_http nginx || echo n/a) ;;
            nginx_wrk) v=$(nginx_wrk) ;;
        esac
        [ "$v" = n/a ] || v=$(printf '%.0f' "$v")
        echo "  round $round $row: $v Mbps" >&2
        values[$row]="${values[$row]:-} $v"
        this[$row]=$v
    done
    for name in "${!pairs[@]}"; do
        read -r mine peer <<<"${pairs[$name]}"
        r=$(ratio "${this[$mine]}" "${this[$peer]}")
        echo "  round $round ratio $name: $r" >&2
        ratios[$name]="${ratios[$name]:-} $r"
    done
done

median() { # values... -> median (n/a if any is n/a)
    case " $* " in *" n/a "*) echo n/a; return ;; esac
    printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
declare -A med
for row in "${rows[@]}"; do
    # shellcheck disable=SC2086
    m=$(median ${values[$row]})
    [ "$m" = n/a ] || m=$(printf '%.0f' "$m")
    med[$row]=$m
done
mr() { # ratio name -> median ratio
    # shellcheck disable=SC2086
    m=$(median ${ratios[$1]})
    [ "$m" = n/a ] || m=$(printf '%.3f' "$m")
    echo "$m"
}

echo
printf '%-44s %12s\n' "Row (median of $ROUNDS, ${DURATION} s each)" "Mbps"
printf '%-44s %12s\n' "linerate tcp -P 5 --window 256k, download" "${med[lr_tcp_down]}"
printf '%-44s %12s\n' "iperf3 -P 5 -w 256K -R (download)" "${med[iperf_tcp_down]}"
printf '%-44s %12s\n' "linerate tcp -P 5 --window 256k, upload" "${med[lr_tcp_up]}"
printf '%-44s %12s\n' "iperf3 -P 5 -w 256K (upload)" "${med[iperf_tcp_up]}"
printf '%-44s %12s\n' "linerate http, built-in server, 5 clients" "${med[lr_http_builtin]}"
printf '%-44s %12s\n' "linerate http --server nginx, 5 clients" "${med[lr_http_nginx]}"
printf '%-44s %12s\n' "nginx + wrk -c 5" "${med[nginx_wrk]}"
echo
echo "Ratios linerate/peer, median of the per-round ratios (target >= 0.95):"
printf '  %-52s %s\n' "tcp download: linerate / iperf3" "$(mr tcp_download)"
printf '  %-52s %s\n' "tcp upload:   linerate / iperf3" "$(mr tcp_upload)"
printf '  %-52s %s\n' "http: linerate (server + clients) / nginx + wrk" "$(mr http_all)"
printf '  %-52s %s\n' "http: linerate clients / wrk (both against nginx)" "$(mr http_clients)"
