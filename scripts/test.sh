#!/usr/bin/env bash
# Runs every check CI runs: install + build, format, lints, all tests.
# As root the integration tests build namespaces and send traffic inside
# them; without root they print SKIPPED and pass.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then
    scripts/setup.sh
else
    echo "test.sh: WARNING: not root; packages are not installed and the root tests will be SKIPPED" >&2
fi
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --all -- --check
cargo clippy --release --all-targets --locked -- -D warnings
# One test at a time: the traffic tests measure rates on a 2-core machine.
cargo test --workspace --release --locked -- --test-threads=1
# Nothing may be left behind by any test.
left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep '^lr-' || true)
if [ -n "$left" ]; then
    echo "test.sh: FAIL: namespaces left behind: $left" >&2
    exit 1
fi
echo "test.sh: all checks passed"
