"""What the tests of the Python package share: the root gate (as the Rust
tests: a skip fails under LINERATE_REQUIRE_ALL=1, which CI sets) and the
check that nothing is left behind."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
BINARY = REPO / "target" / "release" / "linerate"


def lab_namespaces():
    """The lab namespaces (lr-*) on this machine."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("lr-")}


@pytest.fixture
def root():
    """Skips a test that needs root when not root; fails it instead when
    LINERATE_REQUIRE_ALL=1."""
    if os.geteuid() == 0:
        return
    if os.environ.get("LINERATE_REQUIRE_ALL") == "1":
        pytest.fail("needs root (LINERATE_REQUIRE_ALL=1 makes this skip a failure)")
    pytest.skip("needs root")


def namespaces_of(pid):
    """The namespaces of labs made by process `pid`: a run's own labs
    (lr-run<pid>-*, and lr-run<pid>b-* ... for runs at once) and the tests'
    named labs (lr-py<pid>-*)."""
    import re

    own = re.compile(rf"lr-(run{pid}[a-z]?|py{pid})-")
    return {ns for ns in lab_namespaces() if own.match(ns)}


@pytest.fixture
def no_leftovers(root):
    """Fails the test if it leaves a lab namespace of this process."""
    yield
    left = namespaces_of(os.getpid())
    assert not left, f"namespaces left behind: {sorted(left)}"
