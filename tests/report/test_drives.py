"""The report's per-drive table: identity, link, wear and errors beside each drive's fio numbers,
the slow (sibling rule) and worn (profile) drives marked; checkpoint time and data-path verdict.

Controllers come from the real sysfs reader on the kernel-layout tree of storagehelp; health
metrics from the real nvme-cli parser on real captured smart-log JSON; the per-drive fio numbers
are synthetic (no multi-drive machine here) and judged by the real sibling rule and compare.
"""

from __future__ import annotations

from pathlib import Path

from storagehelp import make_sysfs

from harness import siblings
from harness.compare.judge import evaluate
from harness.compare.rules import Rule
from harness.config.models import Expectation
from harness.model import CheckResult, Metric, RunRecord, Status
from harness.parsers import nvme as nvme_parser
from harness.platform import nvme
from harness.report.drives import controller_of, drive_table
from harness.report.html import render_html
from harness.units import GBPS, IOPS, SECONDS

SMART = Path(__file__).parents[1] / "data" / "nvme-smart"


def _health(tmp_path: Path) -> CheckResult:
    ctrls = [c for c in nvme.controllers(make_sysfs(tmp_path / "sys")) if c.transport == "pcie"]
    metrics = []
    for c, sample in zip(ctrls, ("netdata-nvme-cli-2.1.1-string-values.json",
                                 "dell-disk-exporter-nvme-cli-1.x-spaced-temperature-sensors.json"),
                         strict=True):
        parsed = nvme_parser.parse((SMART / sample).read_text())
        metrics += [Metric(m.name, m.value, m.unit, {**m.labels, "device": c.name, "serial": c.serial})
                    for m in parsed.metrics]
    rule = Rule(Expectation(metric="nvme.percentage_used", max=10, unit="%"), "test profile")
    return CheckResult("nvme-health", "nvme_health", Status.FAILED, "2 NVMe", metrics=tuple(metrics),
                       evaluations=evaluate([rule], metrics),
                       details={"tool": "nvme", "controllers": [c.to_dict() for c in ctrls]})


def _fio_all() -> CheckResult:
    bw = {"nvme0n1": 3.2, "nvme1n1": 1.1, "loop0": 3.1, "nvme10n1": 3.15}  # synthetic
    metrics = []
    for dev, v in bw.items():
        labels = {"job": "seqread_1m", "rw": "read", "device": dev}
        metrics += [Metric("fio.bw", v, GBPS, labels), Metric("fio.iops", v * 1e9 / 2**20, IOPS, labels)]
    evs = siblings.judge(siblings.SiblingRule("fio.bw", ("device",), 0.15), metrics)
    return CheckResult("nvme-all-read", "fio", Status.FAILED, "seqread_1m read: 4 devices",
                       metrics=tuple(metrics), evaluations=evs)


def _record(tmp_path: Path) -> RunRecord:
    checkpoint = CheckResult("checkpoint", "fio", Status.PASSED,
                             "checkpoint write 1.25 GB/s 1,190 IOPS, durable after 6.87 s",
                             metrics=(Metric("fio.persist_time", 6.87, SECONDS,
                                             {"job": "checkpoint", "rw": "write"}),))
    data_path = CheckResult("data-path", "data_path", Status.FAILED,
                            "I/O-bound: feeds 0.6x of what the GPUs consume (1.30 of 2.16 GB/s needed)",
                            details={"verdict": "I/O-bound: feeds 0.6x of what the GPUs consume"})
    return RunRecord("r1", "node1", {"name": "storage"}, {"name": "p"}, "2026-01-01T00:00:00Z",
                     "2026-01-01T00:10:00Z", 600.0, {}, (_health(tmp_path), _fio_all(), checkpoint,
                                                         data_path), "0.1.0")


def test_controller_of_namespaces():
    assert [controller_of(d) for d in ("nvme0n1", "nvme12n3", "nvme0c1n1", "sda", "loop0")] == [
        "nvme0", "nvme12", "nvme0", "sda", "loop0"]


def test_each_drive_gets_identity_health_and_performance_with_the_slow_one_marked(tmp_path):
    table = drive_table(_record(tmp_path))
    assert table is not None
    assert table.perf_columns == ("nvme-all-read: seqread_1m read",)
    rows = {r.drive.split(" ")[0]: r for r in table.rows}
    assert list(rows) == ["nvme0", "nvme1", "loop0", "nvme10"]  # health check's, then fio's order
    n0, n1 = rows["nvme0"], rows["nvme1"]
    assert n0.drive == "nvme0 (nvme0n1)"
    assert (n0.model, n0.serial, n0.firmware, n0.link) == (
        "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0R000001", "GDC5602Q", "Gen4 x4")
    assert n1.link == "Gen3 x2 (below max Gen4 x4)"
    assert (n0.wear, n0.spare) == ("2 % used", "100 % (warns at 5 %)")
    assert n0.errors == "warning 0 · media 0 · log 110"
    assert n0.perf == ("3.2 GB/s · 3,052 IOPS",) and n0.outcome == "pass"
    # nvme1: 15 % used breaks the profile's 10 % and it reads at a third of its siblings' median
    assert n1.outcome == "fail" and n1.wear == "15 % used"
    assert any("below the median" in n and n.startswith("fio.bw: nvme1n1") for n in n1.notes)
    assert any(n.startswith("nvme.percentage_used: measured 15 %") for n in n1.notes)
    loop = rows["loop0"]  # a fio target that is no NVMe drive: numbers only
    assert (loop.model, loop.wear, loop.perf) == ("—", "—", ("3.1 GB/s · 2,956 IOPS",))
    assert loop.outcome == "pass" and loop.notes == ()  # within its siblings' median
    assert rows["nvme10"].drive == "nvme10 (nvme10n1)"  # NVMe/TCP: measured but not in the health check


def test_report_shows_the_drive_table_checkpoint_time_and_data_path_verdict(tmp_path):
    html = render_html(_record(tmp_path), None)
    drives = html[html.index('<h2 id="drives">'):html.index('<section class="check ')]
    assert drives.count('<tr class="row-fail">') == 1 and drives.count('<tr class="row-pass">') == 3
    assert "Gen3 x2 (below max Gen4 x4)" in drives and "S64HNE0R100001" in drives
    assert "durable after 6.87 s" in html
    assert "I/O-bound: feeds 0.6x of what the GPUs consume" in html


def test_no_table_without_drive_checks(tmp_path):
    rec = _record(tmp_path)
    only = RunRecord(rec.run_id, rec.host, rec.suite, rec.profile, rec.started, rec.finished, 1.0, {},
                     rec.checks[2:], "0.1.0")
    assert drive_table(only) is None
    assert '<h2 id="drives">' not in render_html(only, None)
