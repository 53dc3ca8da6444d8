#!/usr/bin/env bash
# bench-esp.sh - the tester's own ceiling with ESP in the data path: how many
# frames/s linerate's af_xdp and af_packet engines send (encrypting) and
# receive (decrypting), one core each side, next to the same engines without
# ESP, on ONE veth pair, in ONE run. A benchmark, not a timed test.
#
#   rows     (engine af_xdp, af_packet) x (ESP none, aes128gcm16, aes256gcm16,
#            aes128-sha256) x (frame size 64, 512, 1518 bytes with FCS)
#   columns  frames/s sent and received, counted by the engine AND by the
#            veth's kernel counters (flagged when they differ by > 1 %), lost
#            frames, the ratio to the no-ESP row of the same engine and size,
#            CPU use of the generator, port B's receiver and its NAPI kthread
#   cores    port A's threads (generator + encryption) on --tx-cpu, port B's
#            receiver (decryption) and its veth's threaded NAPI on --rx-cpu
#   threads  --threads N: port A sends with N generator threads, each on a
#            queue of its own (the veth made with N tx and rx queues on both
#            ends; af_xdp: an AF_XDP socket per queue, af_packet: a packet
#            socket per thread), as `--tx-threads N` does; with ESP N SAs,
#            one per thread, as `--ipsec --tunnels N --tx-threads N` deals
#            them out; port B receives on every queue with one thread and
#            opens all N SAs. Generator thread k on CPU k (the k-th this
#            process may use); receivers and NAPI where the scheduler puts
#            them (--tx-cpu/--rx-cpu place the rows of one thread). A list,
#            --threads "1 2", runs every row with each count on the same
#            veth (as many queues as the largest count) and prints the
#            ratio N threads / 1 thread per engine, suite and size, each
#            run's figure, with issue 40's verdict (2 encrypting threads
#            >= 1.6x one, AES-128-GCM 64 B >= 1.2 Mframes/s per thread in
#            every run). Rows of several threads add the columns threads,
#            sent fps per thread (veth), where each thread ran, what each SA
#            sealed and what each of port B's queues carried.
#
# It builds crates/engine/examples/esp_ceiling.rs in release (cargo build
# --release -p linerate-engine --example esp_ceiling) and runs it; the example
# builds a namespace lrespc-<pid> with the veth pair (MTU 1600: a 1518-byte
# frame plus ESP in UDP) and removes it on exit, error, panic, Ctrl-C and
# SIGTERM (this script removes it too if the example was killed). Output: a
# markdown table on stdout (the command line at its top), progress on stderr.
# The machine's CPU model and load average are printed before and after: on
# a shared machine other work moves the figures, so compare rows of one run,
# or repeat the table with --runs N and read each row's range.
#
# Tools: ip, ethtool, sh, cargo (unless --no-build). Installs nothing.
#
# Usage (root):  scripts/bench-esp.sh [--duration 2s] [--sizes "64 512 1518"]
#                    [--engines "af_xdp af_packet"]
#                    [--suites "none aes128gcm16 aes256gcm16 aes128-sha256"]
#                    [--runs N] [--line-speed 100G] [--mtu 1600]
#                    [--tx-cpu 0] [--rx-cpu 1] [--threads 1] [--out FILE]
#                    [--no-build]
# --runs N repeats the whole table N times and reports each row's range.
# --threads takes a count or a list ("1 2"); 1 (the default) prints the
# table as it was before the option.
# Issue 40's benchmark of encrypting threads (5 runs, 2 threads against 1):
#   scripts/bench-esp.sh --threads "1 2" --runs 5 --sizes 64 \
#       --suites "none aes128gcm16"
# Environment equivalents: BENCH_DURATION, BENCH_SIZES, BENCH_ENGINES,
# BENCH_SUITES, BENCH_RUNS, BENCH_LINE_SPEED, BENCH_MTU, TX_CPU, RX_CPU,
# BENCH_THREADS, BENCH_OUT, CARGO; CARGO_TARGET_DIR says where the build is.
set -euo pipefail

ME=bench-esp
REPO=$(cd "$(dirname "$0")/.." && pwd)
COMMAND="$0${*:+ $*}"

DURATION=${BENCH_DURATION:-2}
SIZES=${BENCH_SIZES:-64 512 1518}
ENGINES=${BENCH_ENGINES:-af_xdp af_packet}
SUITES=${BENCH_SUITES:-none aes128gcm16 aes256gcm16 aes128-sha256}
RUNS=${BENCH_RUNS:-1}
# `100 %` of the line speed: far above what one core sends at every size
# (10G would hold 1518-byte frames at 813 kframes/s, below af_xdp's ceiling).
LINE_SPEED=${BENCH_LINE_SPEED:-100G}
MTU=${BENCH_MTU:-1600}
TX_CPU=${TX_CPU:-0}
RX_CPU=${RX_CPU:-1}
THREADS=${BENCH_THREADS:-1}
OUT=${BENCH_OUT:-}
CARGO=${CARGO:-cargo}
BUILD=1

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        --duration) DURATION=${2:?}; shift 2 ;;
        --sizes) SIZES=${2:?}; shift 2 ;;
        --engines) ENGINES=${2:?}; shift 2 ;;
        --suites) SUITES=${2:?}; shift 2 ;;
        --runs) RUNS=${2:?}; shift 2 ;;
        --line-speed) LINE_SPEED=${2:?}; shift 2 ;;
        --mtu) MTU=${2:?}; shift 2 ;;
        --tx-cpu) TX_CPU=${2:?}; shift 2 ;;
        --rx-cpu) RX_CPU=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "$ME: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if ! [[ $RUNS =~ ^[0-9]+$ ]] || [ "$RUNS" -lt 1 ]; then
    echo "$ME: --runs must be a number >= 1, got '$RUNS'" >&2; exit 2
fi
# Counts of generator threads, commas or spaces between them.
THREADS=$(printf '%s' "$THREADS" | tr ',' ' ' | xargs)
if [ -z "$THREADS" ]; then
    echo "$ME: --threads needs a count >= 1 (or a list: \"1 2\")" >&2; exit 2
fi
for t in $THREADS; do
    if ! [[ $t =~ ^[0-9]+$ ]] || [ "$((10#$t))" -lt 1 ]; then
        echo "$ME: --threads takes counts >= 1, got '$t'" >&2; exit 2
    fi
done
# A bare number is seconds, as in bench-engines.sh.
[[ $DURATION =~ ^[0-9.]+$ ]] && DURATION=${DURATION}s

if [ "$(id -u)" != 0 ]; then
    echo "$ME: run as root (it creates a namespace and veths, and opens packet sockets): sudo $0" >&2; exit 2
fi

missing=()
for t in ip ethtool sh; do
    command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
[ "$BUILD" = 0 ] || command -v "$CARGO" >/dev/null 2>&1 || missing+=("cargo (or build as your user and pass --no-build)")
if [ ${#missing[@]} -gt 0 ]; then
    echo "$ME: missing tools: ${missing[*]} (scripts/setup.sh installs them)" >&2; exit 2
fi

BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/examples/esp_ceiling
if [ "$BUILD" = 1 ]; then
    echo "$ME: building: $CARGO build --release -p linerate-engine --example esp_ceiling" >&2
    (cd "$REPO" && "$CARGO" build --release -p linerate-engine --example esp_ceiling) >&2
fi
if [ ! -x "$BIN" ]; then
    echo "$ME: no $BIN (build it: cargo build --release -p linerate-engine --example esp_ceiling)" >&2; exit 2
fi

# --- cleanup -------------------------------------------------------------------
CHILD=
TABLE=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$CHILD" ]; then
        # The example removes its namespace on SIGTERM; a second signal or
        # a kill would leave it, so it is removed here too.
        kill -TERM "$CHILD" 2>/dev/null || true
        wait "$CHILD" 2>/dev/null || true
        ip netns del "lrespc-$CHILD" 2>/dev/null || true
    fi
    [ -z "$TABLE" ] || rm -f "$TABLE"
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "$ME: interrupted" >&2; exit 130' INT TERM

# out LINE...: to stdout, and to --out FILE when given.
out() {
    if [ -n "$OUT" ]; then printf '%s\n' "$@" | tee -a "$OUT"; else printf '%s\n' "$@"; fi
}

# --- machine -------------------------------------------------------------------
[ -z "$OUT" ] || : >"$OUT"
load() { cut -d' ' -f1-3 /proc/loadavg; }
busy() { awk -v l="${1%% *}" 'BEGIN { exit !(l >= 0.5) }'; }
CPU_MODEL=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
LOAD_BEFORE=$(load)
START=$(date +%s)
out "$ME: $COMMAND" \
    "$ME: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -r), $(nproc) CPUs (${CPU_MODEL:-unknown model}), load average before: $LOAD_BEFORE"
if busy "$LOAD_BEFORE"; then
    out "$ME: WARNING: load average $LOAD_BEFORE before the run: other work on this machine moves the figures (quote them only from a quiet machine)"
fi
out ""

# In the background, so that the cleanup knows its pid (its namespace's name).
# --threads only when asked: one thread is the example's default, and its
# command line (printed in the table) stays as it was.
TABLE=$(mktemp /tmp/bench-esp.XXXXXX)
THREAD_ARGS=()
[ "$THREADS" = 1 ] || THREAD_ARGS=(--threads "$THREADS")
"$BIN" --duration "$DURATION" --sizes "$SIZES" --engines "$ENGINES" --suites "$SUITES" \
    --runs "$RUNS" --line-speed "$LINE_SPEED" --mtu "$MTU" --tx-cpu "$TX_CPU" --rx-cpu "$RX_CPU" \
    "${THREAD_ARGS[@]}" >"$TABLE" &
CHILD=$!
rc=0
wait "$CHILD" || rc=$?
ip netns del "lrespc-$CHILD" 2>/dev/null || true
CHILD=
if [ -n "$OUT" ]; then tee -a "$OUT" <"$TABLE"; else cat "$TABLE"; fi

LOAD_AFTER=$(load)
out "" "$ME: done in $(( $(date +%s) - START )) s (exit $rc), load average after: $LOAD_AFTER (before: $LOAD_BEFORE)${OUT:+; written to $OUT}"
if busy "$LOAD_AFTER"; then
    out "$ME: WARNING: load average $LOAD_AFTER after the run: the figures are noisy"
fi
exit "$rc"
