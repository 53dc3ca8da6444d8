"""examples/rfc2544_table.py runs and prints the table it promises."""

import subprocess
import sys

from conftest import REPO, namespaces_of


def test_the_example_prints_the_rfc2544_table(root):
    example = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "rfc2544_table.py"), "--sizes", "64", "1518", "--trial-duration", "1s"],
        stdout=subprocess.PIPE, text=True,
    )
    out, _ = example.communicate(timeout=300)
    assert example.returncode == 0
    assert not namespaces_of(example.pid), "the example left its lab behind"
    lines = out.splitlines()
    assert any(line.startswith("RFC 2544 throughput") for line in lines)
    # One progress line per trial before the table.
    assert sum(1 for line in lines if " fps  loss " in line) >= 2
    header = next(line for line in lines if line.startswith("frame size"))
    assert header.split()[-2:] == ["64", "1518"]
    fps = next(line for line in lines if line.startswith("Throughput [fps]"))
    assert all(int(v.replace(",", "")) > 0 for v in fps.split()[2:])
    # MLRsearch's NDR and PDR beneath, one figure per size.
    for name in ("NDR", "PDR"):
        row = next(line for line in lines if line.startswith(f"{name} [fps]"))
        assert len(row.split()[2:-1]) == 2, row
