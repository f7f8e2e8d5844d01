"""Prometheus exposition of a run the Prometheus way (one family per metric, base units, GPU labels
that join dcgm-exporter's), the textfile, and a push to a real Pushgateway read back over HTTP."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import report_samples as samples
from clihelp import harness
from promhelp import parse, pushgateway, scrape

from harness import catalog, results
from harness.fleet import report as fleet_report
from harness.fleet.collect import NodeStatus
from harness.fleet.stats import SeriesKey
from harness.model import CheckResult, Evaluation, Metric, Outcome, RunRecord, Status
from harness.report import prometheus as prom
from harness.units import PROM_BASE, UNITS

NODE = "gpu-node-017"
UUID3 = "GPU-3f0c0003-9a1b-4c2d-8e7f-0123456789ab"


def series(text: str, family: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (name, labels), v in parse(text).items() if name == family}


def with_checks(*checks: CheckResult) -> RunRecord:
    return replace(samples.record(), checks=checks)


def test_one_family_per_metric_in_its_base_unit_without_a_unit_label():
    text = prom.exposition(prom.run_samples(samples.record(), NODE))
    got = parse(text)
    assert not any(name == "harness_metric" for name, _ in got)
    assert not any("unit" in dict(labels) for _, labels in got)
    (bw,) = series(text, "harness_fio_bandwidth_bytes_per_second").items()
    assert dict(bw[0]) == {"node": NODE, "check": "fio-seqread", "device": "nvme0n1", "rw": "read"}
    assert bw[1] == pytest.approx(1.234e9)
    (p99,) = series(text, "harness_fio_completion_latency_p99_seconds").values()
    assert p99 == pytest.approx(0.000412e-6)
    (iops,) = series(text, "harness_fio_iops").values()
    assert iops == 1234567.0
    (tf,) = series(text, "harness_gpu_flops").values()
    assert tf == pytest.approx(612.75e12)
    assert "# TYPE harness_gpu_temperature_max_celsius gauge" in text
    assert "# HELP harness_gpu_temperature_max_celsius hottest GPU temperature during the check" in text


def test_gpu_series_carry_gpu_and_uuid_as_dcgm_exporter_does():
    text = prom.exposition(prom.run_samples(samples.record(), NODE))
    temps = series(text, "harness_gpu_temperature_max_celsius")
    assert len(temps) == 8
    by_gpu = {dict(k)["gpu"]: (dict(k)["UUID"], v) for k, v in temps.items()}
    assert by_gpu["3"] == (UUID3, 74.0)
    assert len({u for u, _ in by_gpu.values()}) == 8
    (flops,) = series(text, "harness_gpu_flops")
    assert dict(flops)["UUID"] == UUID3
    # a GPU the inventory does not know keeps its index and gets no made-up UUID
    rec = with_checks(CheckResult("t", "gpu_burn", Status.PASSED, metrics=(
        Metric("gpu.temp_max", 50.0, "C", {"gpu": 9}),)))
    ((labels, _),) = series(prom.exposition(prom.run_samples(rec, NODE)),
                            "harness_gpu_temperature_max_celsius").items()
    assert dict(labels) == {"node": NODE, "check": "t", "gpu": "9"}


def test_a_message_size_sweep_is_exported_as_its_largest_size():
    sweep = tuple(Metric("nccl.busbw", bw, "GB/s", {"op": "all_reduce", "placement": "out", "size": size})
                  for size, bw in ((1024, 0.5), (1 << 30, 310.0), (8 << 30, 355.2), (4 << 30, 350.0)))
    rec = with_checks(CheckResult("nccl", "nccl", Status.PASSED, metrics=(
        *sweep, Metric("nccl.avg_busbw", 241.3, "GB/s"),
        Metric("nccl.time", 48213.4, "us", {"size": 8 << 30}),
        Metric("nccl.time", 9.0, "us", {"size": 1024}))))
    text = prom.exposition(prom.run_samples(rec, NODE))
    busbw = series(text, "harness_nccl_bus_bandwidth_bytes_per_second")
    assert busbw == {(("check", "nccl"), ("node", NODE), ("op", "all_reduce"), ("placement", "out")):
                     pytest.approx(355.2e9)}
    assert series(text, "harness_nccl_time_seconds") == {(("check", "nccl"), ("node", NODE)):
                                                          pytest.approx(0.0482134)}
    assert list(series(text, "harness_nccl_avg_bus_bandwidth_bytes_per_second").values()) == [
        pytest.approx(241.3e9)]
    assert "size" not in text


def test_cumulative_counts_are_counters_and_percentages_ratios():
    rec = with_checks(CheckResult("nvme", "nvme_health", Status.PASSED, metrics=(
        Metric("nvme.media_errors", 3.0, "count", {"device": "nvme0"}),
        Metric("nvme.data_units_written", 5.12e11, "B", {"device": "nvme0"}),
        Metric("nvme.percentage_used", 7.0, "%", {"device": "nvme0"}),
        Metric("nvme.count", 2.0, "count"))))
    text = prom.exposition(prom.run_samples(rec, NODE))
    assert "# TYPE harness_nvme_media_errors_total counter" in text
    assert series(text, "harness_nvme_media_errors_total") == {
        (("check", "nvme"), ("device", "nvme0"), ("node", NODE)): 3.0}
    assert list(series(text, "harness_nvme_data_written_bytes_total").values()) == [5.12e11]
    assert list(series(text, "harness_nvme_endurance_used_ratio").values()) == [pytest.approx(0.07)]
    assert "# TYPE harness_nvme_devices gauge" in text  # `_count` is reserved (promtool)


def test_every_unit_converts_and_every_catalogue_metric_has_its_own_family():
    assert set(PROM_BASE) == set(UNITS)
    names = {n: prom.family(n, s.unit) for n, s in catalog.METRICS.items()}
    assert len(set(names.values())) == len(names)
    assert all(f.startswith("harness_") and prom._BAD.search(f) is None for f in names.values())
    assert names["gpu.temp"] == "harness_gpu_temperature_celsius"
    assert names["gpu.sm_clock_mean"] == "harness_gpu_sm_clock_mean_hertz"
    assert names["gpu.throttle_pct"] == "harness_gpu_throttle_ratio"
    assert names["power.headroom_pct"] == "harness_power_headroom_ratio"
    assert names["gpu.energy"] == "harness_gpu_energy_joules"
    assert names["gpu.power_max"] == "harness_gpu_power_max_watts"
    assert names["host.memory"] == "harness_host_memory_bytes"
    assert set(catalog.METRICS) >= catalog.COUNTERS
    # a suite's own metric (command kind) in an odd unit still makes a valid name
    assert prom.family("app.p99-lat", "us") == "harness_app_p99_latency_seconds"
    assert prom.family("x", "furlongs/fortnight") == "harness_x_furlongs_fortnight"


def test_no_family_ends_in_a_suffix_reserved_for_histograms_and_summaries():
    """promtool check metrics: 'non-histogram and non-summary metrics should not have "_count" suffix'."""
    gauges = [prom.family(n, s.unit) for n, s in catalog.METRICS.items() if not prom.is_counter(n)]
    assert not [f for f in gauges if f.endswith(prom.RESERVED_SUFFIXES)]
    assert prom.family("gpu.count", "count") == "harness_gpu_devices"
    assert prom.family("host.nvme_count", "count") == "harness_host_nvme_devices"
    assert prom.family("app.queue_count", "count") == "harness_app_queue_count_value"  # a suite's own
    assert prom.family("app.bytes_sum", "B") == "harness_app_bytes_sum_bytes"


def test_promtool_finds_no_problem_in_a_full_export():
    """Every kind of family at once (GPU series, counters, ratios, drift, check status) through the
    real linter: `promtool check metrics` exits 0 and says nothing."""
    import subprocess

    from promhelp import need

    exe = need("promtool", "prometheus")
    catalogue = CheckResult("all", "command", Status.PASSED, "", "2026-01-01T00:00:00Z", 1.0,
                            tuple(Metric(n, 1.0, s.unit) for n, s in catalog.METRICS.items()))
    rec = samples.record()
    text = prom.exposition(prom.run_samples(replace(rec, checks=(*rec.checks, catalogue)), NODE))
    r = subprocess.run([exe, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")
    # a drive counts power-on hours; promtool wants base units: seconds
    (hours,) = series(text, "harness_nvme_power_on_seconds_total").values()
    assert hours == 3600.0


def test_run_info_names_suite_profile_version_and_run():
    rec = samples.record()
    (info,) = series(prom.exposition(prom.run_samples(rec, NODE)), "harness_run_info").items()
    assert dict(info[0]) == {"node": NODE, "suite": "h100-acceptance", "profile": rec.profile["name"],
                             "version": rec.harness_version, "run": rec.run_id}
    assert info[1] == 1.0


def test_label_names_are_valid_and_never_clash_with_ours():
    assert prom.label_name("job") == "metric_job" and prom.label_name("node") == "metric_node"
    assert prom.label_name("UUID") == "metric_UUID" and prom.label_name("metric") == "metric_metric"
    assert prom.label_name("gpu") == "gpu" and prom.label_name("pci-bus.id") == "pci_bus_id"
    assert prom.label_name("0x") == "l_0x" and prom.label_name("__x") == "l_x"
    odd = CheckResult("fio", "fio", Status.PASSED,
                      metrics=(Metric("fio.bw", 2.5, "GB/s", {"job": "seq r\"d\n"}),))
    got = series(prom.exposition(prom.run_samples(with_checks(odd), NODE)),
                 "harness_fio_bandwidth_bytes_per_second")
    ((labels, value),) = got.items()
    assert dict(labels)["metric_job"] == 'seq r"d\n' and value == 2.5e9


def test_drift_is_a_relative_change_and_a_beyond_limit_flag():
    def judged(metric, labels, outcome, severity, measured, unit, reference, low, high, message):
        return Evaluation(metric=metric, labels=labels, outcome=outcome, severity=severity, measured=measured,
                          unit=unit, reference=reference, low=low, high=high, reduce="each", message=message,
                          source="drift: suite quarterly")  # as history's drift check sources them

    ev = [judged("gpu.temp_max", {"gpu": 3, "vs": "previous", "check": "burn"}, Outcome.FAIL, "fail",
                 80.0, "C", 64.0, None, 70.4, "drifted"),
          judged("fio.bw", {"vs": "go-live", "check": "fio"}, Outcome.PASS, "fail", 6.6, "GB/s", 6.8,
                 6.1, None, "ok"),
          judged("gpu.ecc_corrected", {"vs": "previous"}, Outcome.PASS, "warn", 0.0, "count", 0.0,
                 None, 5.0, "reference is 0")]
    rec = with_checks(CheckResult("drift", "drift", Status.FAILED, evaluations=tuple(ev)))
    text = prom.exposition(prom.run_samples(rec, NODE))
    change = {dict(k)["metric"]: v for k, v in series(text, "harness_drift_change_ratio").items()}
    assert change == {"harness_gpu_temperature_max_celsius": pytest.approx(0.25),
                      "harness_fio_bandwidth_bytes_per_second": pytest.approx(-0.2 / 6.8)}
    beyond = {(dict(k)["metric"], dict(k)["check"]): v
              for k, v in series(text, "harness_drift_beyond_limit").items()}
    assert beyond == {("harness_gpu_temperature_max_celsius", "burn"): 1.0,
                      ("harness_fio_bandwidth_bytes_per_second", "fio"): 0.0,
                      ("harness_gpu_ecc_corrected", "drift"): 0.0}
    (temp,) = [dict(k) for k in series(text, "harness_drift_beyond_limit") if dict(k).get("gpu") == "3"]
    assert temp["UUID"] == UUID3 and temp["vs"] == "previous"


@dataclass
class _Outcome:
    node: str
    record: RunRecord | None
    status: NodeStatus


@dataclass
class _Outlier:
    node: str
    key: SeriesKey
    z: float


@dataclass
class _Fleet:
    nodes: list[_Outcome]
    outliers: list[_Outlier]

    def outliers_of(self, node: str) -> list[_Outlier]:
        return [o for o in self.outliers if o.node == node]

    def record_of(self, outcome: _Outcome) -> RunRecord | None:
        return outcome.record


def test_fleet_outlier_zscore_names_the_family_and_has_no_unit():
    key = SeriesKey("h100", "nccl", "nccl.busbw", "GB/s",
                    (("gpu", "3"), ("op", "all_reduce"), ("size", "8589934592")))
    rep = _Fleet([_Outcome(NODE, samples.record(), NodeStatus.REJECTED),
                  _Outcome("n2", None, NodeStatus.PENDING)],
                 [_Outlier(NODE, key, -4.2)])
    text = prom.exposition(fleet_report.fleet_samples(rep, NODE))  # type: ignore[arg-type]
    assert series(text, "harness_fleet_outlier_zscore") == {
        (("UUID", UUID3), ("check", "nccl"), ("gpu", "3"),
         ("metric", "harness_nccl_bus_bandwidth_bytes_per_second"),
         ("node", NODE), ("op", "all_reduce")): -4.2}
    status = {dict(k)["status"]: v for k, v in series(text, "harness_fleet_node_status").items()}
    assert status["REJECTED"] == 1.0 and sum(status.values()) == 1.0
    pending = prom.exposition(fleet_report.fleet_samples(rep, "n2"))  # type: ignore[arg-type]
    assert "harness_run_verdict" not in pending and 'status="PENDING"} 1.0' in pending


def test_exposition_carries_verdict_and_check_status_as_gauges():
    rec = samples.record()
    text = prom.exposition(prom.run_samples(rec, NODE))
    verdicts = {dict(k)["verdict"]: v for k, v in series(text, "harness_run_verdict").items()}
    assert verdicts == {"ACCEPTED": 0.0, "REJECTED": 1.0, "ERRORED": 0.0, "INCOMPLETE": 0.0, "UNTESTED": 0.0}
    status = {(dict(k)["check"], dict(k)["status"]) for k, v in series(text, "harness_check_status").items()
              if v == 1.0}
    assert status == {(c.id, c.status.value) for c in rec.checks}
    assert all(dict(labels)["node"] == NODE for _, labels in parse(text))


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
        key = ("harness_nccl_bus_bandwidth_bytes_per_second",
               tuple(sorted({"job": "harness", "instance": "", "node": NODE, "check": "nccl-allreduce",
                             "op": "all_reduce"}.items())))
        assert got[key] == pytest.approx(355.2e9)
        failed = [dict(k[1])["check"] for k, v in got.items() if k[0] == "harness_check_status"
                  and dict(k[1]).get("status") == "failed" and v == 1.0]
        assert failed == ["fio-seqread"]
        assert any(k[0] == "push_time_seconds" and dict(k[1])["node"] == NODE for k in got)
        # a second push replaces the node's group (PUT): the old value is gone
        rec = samples.record()
        results.write(run_dir, replace(rec, checks=rec.checks[-1:]))
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
