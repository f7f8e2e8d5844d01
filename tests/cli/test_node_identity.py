"""The node's own name (--node, $HARNESS_NODE, $NODE_NAME from a pod's downward API) names the run,
its history and its Prometheus series; the hostname stays in the inventory; and
`run --prom-textfile DIR` leaves an exposition that promtool accepts."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write
from promhelp import need, parse

from harness.errors import UsageError
from harness.run.session import node_name

LENIENT = "name: lenient\nhardware:\n  memory_min_bytes: 1048576\nexpectations: []\n"
SUITE = ("name: tiny\nchecks:\n  - id: tmp-space\n    kind: command\n    params:\n"
         "      argv: [df, -B1, --output=avail, /tmp]\n      loads_node: false\n      metrics:\n"
         "        - {name: prolog.tmp_free, unit: B, better: higher, regex: '(?P<value>[0-9]+)\\s*$'}\n"
         "    expect:\n      - {metric: prolog.tmp_free, min: 1, unit: B}\n"
         "  - id: inventory\n    kind: inventory\n")


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    suite = write(tmp_path / "tiny.yaml", SUITE)
    profile = write(tmp_path / "lenient.yaml", LENIENT)
    return harness("run", str(suite), "--profile", str(profile), *args,
                   env={"HARNESS_LOCK_FILE": str(tmp_path / "lock"), "NODE_NAME": "", "HARNESS_NODE": "",
                        **(env or {})})


def test_node_name_comes_from_the_option_then_harness_node_then_node_name():
    env = {"HARNESS_NODE": "gpu-b", "NODE_NAME": "gpu-c"}
    assert node_name("gpu-a", env) == "gpu-a"
    assert node_name(None, env) == "gpu-b"
    assert node_name(None, {"NODE_NAME": "gpu-c"}) == "gpu-c"
    assert node_name(None, {"NODE_NAME": " "}) is None
    with pytest.raises(UsageError, match="NODE_NAME 'a/b'"):
        node_name(None, {"NODE_NAME": "a/b"})


def test_a_pods_node_name_names_the_run_and_its_history(tmp_path: Path):
    out, store = tmp_path / "out", tmp_path / "history.sqlite"
    r = _run(tmp_path, "--output", str(out), "--history", str(store), env={"NODE_NAME": "gpu-node-017"})
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = run_dirs(out)
    assert run_dir.name.startswith("gpu-node-017-")
    doc = results(run_dir)
    assert doc["host"] == "gpu-node-017"
    host = doc["inventory"]["host"]
    assert host["hostname"] == "gpu-node-017" and host["os_hostname"] == socket.gethostname()
    shown = harness("history", "show", "--history", str(store))
    assert shown.returncode == 0, shown.stderr
    assert "gpu-node-017" in shown.stdout


def test_the_option_wins_and_a_bad_name_is_refused_before_any_work(tmp_path: Path):
    out = tmp_path / "out"
    r = _run(tmp_path, "--output", str(out), "--history", "off", "--node", "rack4-gpu9",
             env={"NODE_NAME": "pod-node"})
    assert r.returncode == 0, r.stderr
    assert results(run_dirs(out)[0])["host"] == "rack4-gpu9"
    bad = _run(tmp_path, "--output", str(tmp_path / "o2"), "--history", "off", "--node", "../etc")
    assert bad.returncode == 2 and "--node '../etc': not a node name" in bad.stderr
    assert not (tmp_path / "o2").exists()


def test_prom_textfile_from_a_single_run_passes_promtool(tmp_path: Path):
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    r = _run(tmp_path, "--output", str(tmp_path / "out"), "--history", "off", "--node", "gpu-node-017",
             "--prom-textfile", str(textfile))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [p.name for p in textfile.iterdir()] == ["harness.prom"]  # no temporary file left
    text = (textfile / "harness.prom").read_text()
    got = parse(text)
    (info,) = [dict(labels) for name, labels in got if name == "harness_run_info"]
    run_id = run_dirs(tmp_path / "out")[0].name
    assert info == {"node": "gpu-node-017", "suite": "tiny", "profile": "lenient", "version": "0.1.0",
                    "run": run_id}
    assert all(dict(labels)["node"] == "gpu-node-017" for _, labels in got)
    assert any(name == "harness_host_nvme_devices" for name, _ in got)  # was harness_host_nvme_count
    exe = need("promtool", "prometheus")
    check = subprocess.run([exe, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    said = check.stdout + check.stderr
    assert check.returncode == 0 and "error" not in said.lower(), said


def test_prom_textfile_must_be_a_directory(tmp_path: Path):
    r = _run(tmp_path, "--output", str(tmp_path / "out"), "--history", "off",
             "--prom-textfile", str(tmp_path / "missing"))
    assert r.returncode == 2 and "--prom-textfile" in r.stderr
    assert not (tmp_path / "out").exists()


def test_the_machine_stays_one_node_in_history_when_its_pod_reports_another_name(tmp_path: Path):
    """Names come and go (a pod rescheduled, a node renamed); the DMI serial keeps the history one node."""
    from harness.history.store import open_store
    from harness.run import session as app

    suite = write(tmp_path / "tiny.yaml", SUITE.split("  - id: inventory")[0])
    profile = write(tmp_path / "lenient.yaml", LENIENT)
    store = tmp_path / "history.sqlite"

    def machine() -> dict[str, object]:
        return {"host": {"hostname": "harness-acceptance-gpu017-x7k2p"}, "system": {"serial": "SN-7Q2M4K9"}}

    for name in ("gpu017", "rack4-gpu017"):
        done = app.execute(suite=str(suite), profile=str(profile), output=tmp_path / "out", history=store,
                           node=name, argv=("harness",), inventory_probe=machine)
        assert done.code == 0 and done.record is not None and done.record.host == name
        assert done.record.inventory["host"]["os_hostname"] == "harness-acceptance-gpu017-x7k2p"
    db = open_store(store)
    try:
        (row,) = db.nodes()
        assert (row.name, row.system_serial) == ("rack4-gpu017", "SN-7Q2M4K9")
        assert [r.hostname for r in db.runs(row.node_id)] == ["gpu017", "rack4-gpu017"]
    finally:
        db.close()
