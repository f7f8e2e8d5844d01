"""Issue #25 item 7 and #26 item 8: run ids are unique, and history never drops a run silently.
Three runs of one host in one second (the clock stopped: tests/support/clocklaunch.py) with
different --output and one history store used to share `host-<second>`, and the store kept 1 of 3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT, harness, results, run_dirs, write

LAUNCH = Path(__file__).parents[1] / "support" / "clocklaunch.py"
SUITE = "name: tiny\nchecks:\n  - id: inventory\n    kind: inventory\n"
PROFILE = "name: p\nhardware: {memory_min_bytes: 1048576}\n"


def test_three_concurrent_runs_of_one_second_get_three_ids_and_three_history_rows(tmp_path: Path):
    suite, profile = write(tmp_path / "s.yaml", SUITE), write(tmp_path / "p.yaml", PROFILE)
    store = tmp_path / "history.sqlite"
    procs = [subprocess.Popen([sys.executable, str(LAUNCH), "2026-12-01T22:34:51", "run", str(suite),
                               "--profile", str(profile), "-o", str(tmp_path / f"o{i}"), "--quiet",
                               "--history", str(store)],
                              cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, out + err
    ids = [run_dirs(tmp_path / f"o{i}")[0].name for i in range(3)]
    assert len(set(ids)) == 3, ids
    assert all("-20261201T223451Z-" in i for i in ids), ids
    for i, run_id in enumerate(ids):
        assert results(tmp_path / f"o{i}" / run_id)["run_id"] == run_id
    h = harness("history", "--history", str(store), "--json")
    assert h.returncode == 0, h.stderr
    nodes = json.loads(h.stdout)
    node = nodes[0] if isinstance(nodes, list) else nodes["nodes"][0]
    shown = harness("history", str(node.get("node_id", node.get("id"))), "--history", str(store), "--json")
    assert shown.returncode == 0, shown.stderr
    assert sorted(r["run_id"] for r in json.loads(shown.stdout)["runs"]) == sorted(ids)


def test_history_import_keeps_another_run_with_a_taken_id_and_says_so(tmp_path: Path):
    """Runs recorded by an older harness were named host-<second>: two of them with one id are two
    runs (different start, different directory); importing both keeps both, the second as ID~2."""
    suite, profile = write(tmp_path / "s.yaml", SUITE), write(tmp_path / "p.yaml", PROFILE)
    dirs = []
    for i, at in enumerate(("2026-12-01T22:34:51", "2026-12-01T22:40:00")):
        r = subprocess.run([sys.executable, str(LAUNCH), at, "run", str(suite), "--profile", str(profile),
                            "-o", str(tmp_path / f"o{i}"), "--history", "off"],
                           cwd=ROOT, text=True, capture_output=True, timeout=180)
        assert r.returncode == 0, r.stdout + r.stderr
        (d,) = run_dirs(tmp_path / f"o{i}")
        doc = results(d)
        doc["run_id"] = "vm-20261201T223451Z"  # as an older harness named both
        (d / "results.json").write_text(json.dumps(doc))
        dirs.append(d)
    store = tmp_path / "h.sqlite"
    imp = harness("history", "import", *map(str, dirs), "--history", str(store))
    assert imp.returncode == 0, imp.stdout + imp.stderr
    assert "vm-20261201T223451Z~2: node " in imp.stdout and "another run's" in imp.stdout
    assert "imported 2 run(s)" in imp.stdout
    again = harness("history", "import", str(dirs[0]), "--history", str(store))  # the same run: replaced
    assert again.returncode == 0 and "~" not in again.stdout, again.stdout


def test_two_nodes_that_share_a_hostname_are_two_nodes_in_history(tmp_path: Path):
    """Two installs named alike (no DMI serial, no GPU or NVMe serials: VMs) used to be filed under
    one node; their /etc/machine-id tells them apart."""
    suite, profile = write(tmp_path / "s.yaml", SUITE), write(tmp_path / "p.yaml", PROFILE)
    dirs = []
    for i, at in enumerate(("2026-12-01T22:34:51", "2026-12-01T22:34:52")):
        r = subprocess.run([sys.executable, str(LAUNCH), at, "run", str(suite), "--profile", str(profile),
                            "-o", str(tmp_path / f"o{i}"), "--history", "off"],
                           cwd=ROOT, text=True, capture_output=True, timeout=180)
        assert r.returncode == 0, r.stdout + r.stderr
        (d,) = run_dirs(tmp_path / f"o{i}")
        doc = results(d)
        assert doc["inventory"]["host"].get("machine_id") or not Path("/etc/machine-id").exists()
        doc["inventory"]["system"] = {}  # as a VM without a DMI serial
        doc["inventory"]["block_devices"] = []
        doc["inventory"]["host"]["machine_id"] = f"{i + 1:032x}"  # the other node, same hostname
        (d / "results.json").write_text(json.dumps(doc))
        dirs.append(d)
    store = tmp_path / "h.sqlite"
    imp = harness("history", "import", *map(str, dirs), "--history", str(store))
    assert imp.returncode == 0, imp.stdout + imp.stderr
    h = harness("history", "--history", str(store), "--json")
    nodes = json.loads(h.stdout)
    nodes = nodes if isinstance(nodes, list) else nodes["nodes"]
    assert len(nodes) == 2, nodes
