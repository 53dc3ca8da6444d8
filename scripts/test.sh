#!/usr/bin/env bash
# Runs every check CI runs: install + build, format, lints, all tests.
# As root the integration tests build namespaces and send traffic inside
# them. A test that cannot run (no root, a missing package) fails here
# instead of printing SKIPPED and passing: LINERATE_REQUIRE_ALL=1 makes
# every skip a failure, as in CI. LINERATE_REQUIRE_ALL=0 scripts/test.sh
# lets them skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export LINERATE_REQUIRE_ALL="${LINERATE_REQUIRE_ALL:-1}"
if [ "$(id -u)" = 0 ]; then
    scripts/setup.sh
elif [ "$LINERATE_REQUIRE_ALL" = 1 ]; then
    echo "test.sh: WARNING: not root; packages are not installed and the root tests will FAIL (LINERATE_REQUIRE_ALL=1); run as root, or set LINERATE_REQUIRE_ALL=0 to let them skip" >&2
else
    echo "test.sh: WARNING: not root; packages are not installed and the root tests will be SKIPPED" >&2
fi
export PATH="$HOME/.cargo/bin:$PATH"
# The runs the tests store go to a results database of their own, removed
# at the end, never to the user's (~/.local/share/linerate). World-writable
# and sticky: one test runs linerate as nobody.
test_data=$(mktemp -d /tmp/linerate-test-data.XXXXXX)
chmod 1777 "$test_data"
trap 'rm -rf "$test_data"' EXIT
export XDG_DATA_HOME="$test_data"
cargo fmt --all -- --check
cargo clippy --release --all-targets --locked --workspace -- -D warnings
# One test at a time: the traffic tests measure rates on a 2-core machine.
cargo test --release --locked -- --test-threads=1
# The Python package (built into .venv by setup.sh), and its example.
.venv/bin/python -m pytest -q crates/python/tests
# Nothing may be left behind by any test.
left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep '^lr-' || true)
if [ -n "$left" ]; then
    echo "test.sh: FAIL: namespaces left behind: $left" >&2
    exit 1
fi
echo "test.sh: all checks passed"
