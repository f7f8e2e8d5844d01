"""Prometheus exposition of a run, the textfile, and a push to a real Pushgateway read back over HTTP."""

from __future__ import annotations

from pathlib import Path

import report_samples as samples
from clihelp import harness
from promhelp import parse, pushgateway, scrape

from harness import results
from harness.model import Metric
from harness.report import prometheus as prom

NODE = "gpu-node-017"


def test_exposition_parses_and_carries_status_verdict_and_metrics():
    rec = samples.record()
    got = parse(prom.exposition(prom.run_samples(rec, NODE)))
    verdicts = {dict(k[1])["verdict"]: v for k, v in got.items() if k[0] == "harness_run_verdict"}
    assert verdicts == {"ACCEPTED": 0.0, "REJECTED": 1.0, "ERRORED": 0.0, "INCOMPLETE": 0.0, "UNTESTED": 0.0}
    status = {(dict(k[1])["check"], dict(k[1])["status"]): v for k, v in got.items()
              if k[0] == "harness_check_status" and v == 1.0}
    assert status == {(c.id, c.status.value): 1.0 for c in rec.checks}
    busbw = [(dict(k[1]), v) for k, v in got.items() if k[0] == "harness_metric"
             and dict(k[1])["name"] == "nccl.busbw"]
    assert busbw == [({"node": NODE, "check": "nccl-allreduce", "name": "nccl.busbw", "unit": "GB/s",
                       "op": "all_reduce", "size": "8589934592"}, 355.2)]
    assert all(k[1] and dict(k[1])["node"] == NODE for k in got)


def test_label_names_are_valid_and_never_clash_with_ours():
    assert prom.label_name("job") == "metric_job" and prom.label_name("node") == "metric_node"
    assert prom.label_name("gpu") == "gpu" and prom.label_name("pci-bus.id") == "pci_bus_id"
    assert prom.label_name("0x") == "l_0x" and prom.label_name("__x") == "l_x"
    rec = samples.record()
    fio = rec.checks[2]
    odd_metric = Metric("fio.bw", 2.5, "GB/s", {"job": "seq r\"d\n"})
    odd = type(fio)(fio.id, fio.kind, fio.status, metrics=(odd_metric,))
    got = parse(prom.exposition(prom.run_samples(type(rec)(**{**rec.__dict__, "checks": (odd,)}), NODE)))
    ((_, labels),) = [k for k in got if k[0] == "harness_metric"]
    assert dict(labels)["metric_job"] == 'seq r"d\n'


def test_textfile_is_written_atomically_into_a_directory(tmp_path: Path):
    path = prom.write_textfile(tmp_path, prom.run_samples(samples.record(), NODE))
    assert path == tmp_path / "harness.prom"
    key = ("harness_run_duration_seconds", (("node", NODE), ("suite", "h100-acceptance")))
    assert parse(path.read_text())[key] == 1050.2
    assert [p.name for p in tmp_path.iterdir()] == ["harness.prom"]  # no temporary file left


def test_push_to_a_real_pushgateway_and_read_it_back(tmp_path: Path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    results.write(run_dir, samples.record())
    with pushgateway(tmp_path) as url:
        r = harness("fleet", "export", str(run_dir), "--pushgateway", url, "--prom-textfile", str(tmp_path))
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"pushed node {NODE} to {url}" in r.stdout
        got = scrape(url)
        key = ("harness_metric", tuple(sorted({"job": "harness", "instance": "", "node": NODE,
                                               "check": "nccl-allreduce", "name": "nccl.busbw",
                                               "unit": "GB/s", "op": "all_reduce",
                                               "size": "8589934592"}.items())))
        assert got[key] == 355.2
        failed = [dict(k[1])["check"] for k, v in got.items() if k[0] == "harness_check_status"
                  and dict(k[1]).get("status") == "failed" and v == 1.0]
        assert failed == ["fio-seqread"]
        assert any(k[0] == "push_time_seconds" and dict(k[1])["node"] == NODE for k in got)
        # a second push replaces the node's group (PUT): the old value is gone
        rec = samples.record()
        fewer = type(rec)(**{**rec.__dict__, "checks": rec.checks[-1:]})
        results.write(run_dir, fewer)
        r = harness("fleet", "export", str(run_dir), "--pushgateway", url)
        assert r.returncode == 0, r.stderr
        again = scrape(url)
        assert key not in again
        assert any(k[0] == "harness_check_status" and dict(k[1])["check"] == "inventory" for k in again)
    assert (tmp_path / "harness.prom").is_file()


def test_export_needs_a_target(tmp_path: Path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    results.write(run_dir, samples.record())
    r = harness("fleet", "export", str(run_dir))
    assert r.returncode == 2 and "--prom-textfile" in r.stderr


def test_unreachable_pushgateway_is_a_clear_error(tmp_path: Path):
    from promhelp import free_port

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    results.write(run_dir, samples.record())
    url = f"http://127.0.0.1:{free_port()}"
    r = harness("fleet", "export", str(run_dir), "--pushgateway", url, timeout=60)
    assert r.returncode == 3 and f"push to {url} (node={NODE}) failed" in r.stderr
