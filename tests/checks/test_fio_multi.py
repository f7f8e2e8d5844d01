"""fio on several real loop devices at once: per-device metrics, the sibling rule, the guard.

A slow sibling is made for real: this process (and so fio) runs in a blkio cgroup that caps
one loop device's read IOPS. Needs root, losetup and fio; skipped with the reason elsewhere
(the throttled cases also need cgroup v1 blkio).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write
from judging import run_judged
from pydantic import ValidationError
from storagehelp import Loops, can_throttle, read_iops_limits

from harness import siblings
from harness.checks.base import CheckContext
from harness.checks.fio import KIND, FioParams
from harness.checks.fio import multi as fio_multi
from harness.errors import GuardRefusal, HarnessError, SkipCheck, ToolError
from harness.model import Metric, Outcome
from harness.parsers import fio as fio_parser

CI = os.environ.get("CI") == "true"
READ = {"name": "rr", "rw": "randread", "bs": "4k", "iodepth": 8, "runtime": 1}
WRITE = {"name": "w", "rw": "write", "bs": "1M", "iodepth": 4, "runtime": 1, "size": "8M"}


def need(ok: bool, reason: str) -> None:
    if not ok:
        if CI:
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)


@pytest.fixture
def loops(tmp_path, request):
    need(os.geteuid() == 0, "needs root (loop devices)")
    need(shutil.which("losetup") is not None and shutil.which("fio") is not None,
         "needs losetup and fio")
    made = Loops(tmp_path)
    request.addfinalizer(made.cleanup)
    return made


def ctx(run_dir: Path, destructive: bool = False, allow: bool = False, **kw) -> CheckContext:
    return CheckContext("fio", run_dir, 120, destructive, allow, {}, logging.getLogger("t"), **kw)


def head(dev: str, n: int = 8 * 1024 * 1024) -> str:
    fd = os.open(dev, os.O_RDONLY)
    try:
        return hashlib.sha256(os.read(fd, n)).hexdigest()
    finally:
        os.close(fd)


ZERO_8M = hashlib.sha256(bytes(8 * 1024 * 1024)).hexdigest()


# --- params and argv (no fio run) -----------------------------------------------------------

def test_argv_runs_each_job_on_every_device_in_its_own_group():
    p = FioParams.model_validate({"targets": ["/dev/loop1", "/dev/loop2"],
                                  "jobs": [READ, dict(READ, name="r2")]})
    argv = fio_multi.build_argv(p, output="o.json", devices=["/dev/loop1", "/dev/loop2"])
    assert argv[:5] == ["fio", "--output-format=json", "--output=o.json", "--group_reporting", "--readonly"]
    names = [i for i, a in enumerate(argv) if a.startswith("--name=")]
    assert [argv[i] for i in names] == ["--name=rr@loop1", "--name=rr@loop2",
                                        "--name=r2@loop1", "--name=r2@loop2"]
    assert argv[names[0] + 1:names[0] + 4] == ["--stonewall", "--new_group", "--filename=/dev/loop1"]
    assert argv[names[1] + 1:names[1] + 3] == ["--new_group", "--filename=/dev/loop2"]  # runs alongside
    assert argv.count("--stonewall") == 2 and argv.count("--new_group") == 4
    assert not any(a.startswith("--size") for a in argv)  # whole devices


@pytest.mark.parametrize("params, words", [
    ({"targets": []}, "at least one device"),
    ({"targets": ["/dev/a", "/dev/a"]}, "listed twice"),
    ({"targets": "all-sata"}, "Input should be"),
    ({"target": "/tmp", "targets": "all-nvme"}, "either `target` or `targets`"),
    ({"targets": "all-nvme", "sibling_tolerance": 1.5}, "less than 1"),
])
def test_bad_targets(params, words):
    with pytest.raises(ValidationError, match=words):
        FioParams.model_validate(params)


def test_relabel_splits_job_and_device():
    m = fio_multi.relabel(Metric("fio.bw", 1.0, "GB/s", {"job": "rr@nvme0n1", "rw": "read"}))
    assert dict(m.labels) == {"job": "rr", "device": "nvme0n1", "rw": "read"}
    plain = Metric("fio.bw", 1.0, "GB/s", {"job": "rr", "rw": "read"})
    assert fio_multi.relabel(plain) is plain


def test_sibling_rule_on_a_real_capture_of_three_devices():
    # fio 3.33 on three loop devices, loop7 capped at 100 read IOPS (tests/data/fio/SOURCES.md)
    data = Path(__file__).parents[1] / "data" / "fio"
    text = (data / "fio3.33_json_three_loops_new_group_one_throttled.json").read_text()
    metrics = [fio_multi.relabel(m) for m in fio_parser.parse(text).metrics]
    bw = {m.labels["device"]: m.value for m in metrics if m.name == "fio.bw"}
    assert bw == {"loop5": 154133994 / 1e9, "loop6": 141661858 / 1e9, "loop7": 440605 / 1e9}
    (ev,) = siblings.judge(siblings.SiblingRule("fio.bw", ("device",), 0.15), metrics)
    median = 141661858 / 1e9
    assert ev.outcome is Outcome.FAIL and ev.labels == {"job": "rr", "rw": "read", "device": "loop7"}
    assert ev.reference == pytest.approx(median) and ev.low == pytest.approx(median * 0.85)
    assert f"{(median - 440605 / 1e9) / median * 100:.1f} % below the median" in ev.message  # 99.7%
    assert fio_multi.summary(metrics) == "rr read: 3 devices 0.00-0.15 GB/s (slowest loop7)"


def test_a_target_that_is_not_a_block_device(tmp_path):
    with pytest.raises(ToolError, match="is not a block device"):
        run_judged(KIND, FioParams.model_validate({"targets": [str(tmp_path)], "jobs": [READ]}),
                   ctx(tmp_path))


@pytest.mark.skipif(Path("/sys/class/block").exists() and any(
    p.name.startswith("nvme") for p in Path("/sys/class/block").iterdir()), reason="machine has NVMe")
def test_all_nvme_without_nvme_skips_or_errors_as_the_profile_says(tmp_path):
    p = FioParams.model_validate({"targets": "all-nvme", "jobs": [READ]})
    with pytest.raises(SkipCheck, match=r"^no NVMe devices$"):
        run_judged(KIND, p, ctx(tmp_path))
    with pytest.raises(HarnessError, match="profile expects 8 NVMe devices") as e:
        run_judged(KIND, p, ctx(tmp_path, hardware={"nvme_count": 8}))
    assert not isinstance(e.value, SkipCheck)
    (cmd,) = KIND.plan(p, {})
    assert "no device to run on" in cmd.note


# --- real runs on loop devices ----------------------------------------------------------------

def test_read_only_on_three_devices_labels_every_metric(loops, tmp_path):
    devs = [loops.make() for _ in range(3)]
    c = ctx(tmp_path / "run")
    out = run_judged(KIND, FioParams.model_validate({"targets": devs, "jobs": [READ]}), c)
    assert out.problems == ()
    names = {Path(d).name for d in devs}
    bw = {m.labels["device"]: m for m in out.metrics if m.name == "fio.bw"}
    assert set(bw) == names and all(m.value > 0 for m in bw.values())
    assert all(dict(m.labels).keys() == {"job", "rw", "device"} and m.labels["job"] == "rr"
               for m in out.metrics)
    (tool,) = c.tool_runs
    assert "--readonly" in tool.argv
    assert [d["path"] for d in out.details["devices"]] == devs and out.details["excluded"] == []
    assert all(head(d) == ZERO_8M for d in devs)  # nothing written
    assert len(out.evaluations) <= 1  # the sibling rule judged them (noise may flag nothing or one)
    (cmd,) = KIND.plan(FioParams.model_validate({"targets": devs, "jobs": [READ]}), {})
    assert "read-only on the devices; 3 devices at once" in cmd.note
    assert "sibling rule: fio.bw within 15% of the median" in cmd.note


@pytest.mark.skipif(not can_throttle(), reason="needs root and cgroup v1 blkio throttling")
def test_the_sibling_rule_flags_the_slow_device_and_passes_even_ones(loops, tmp_path):
    a, b, slow = (loops.make() for _ in range(3))
    p = FioParams.model_validate({"targets": [a, b, slow], "jobs": [READ]})
    with read_iops_limits({a: 400, b: 400, slow: 400}):
        even = run_judged(KIND, p, ctx(tmp_path / "even"))
    (ev,) = even.evaluations
    assert ev.outcome is Outcome.PASS and ev.metric == "fio.bw" and "within 15 %" in ev.message
    with read_iops_limits({a: 400, b: 400, slow: 100}):
        out = run_judged(KIND, p, ctx(tmp_path / "uneven"))
    (ev,) = out.evaluations
    assert ev.outcome is Outcome.FAIL and ev.labels["device"] == Path(slow).name
    assert f"{Path(slow).name} measured" in ev.message and "below the median" in ev.message
    iops = {m.labels["device"]: m.value for m in out.metrics if m.name == "fio.iops"}
    assert iops[Path(slow).name] < 150 and min(iops[Path(a).name], iops[Path(b).name]) > 300
    assert f"(slowest {Path(slow).name})" in out.summary


@pytest.mark.skipif(not can_throttle(), reason="needs root and cgroup v1 blkio throttling")
def test_harness_run_fails_the_check_that_has_a_slow_sibling(loops, tmp_path):
    a, b, slow = (loops.make() for _ in range(3))
    suite = write(tmp_path / "drives.yaml", f"""\
name: drives
checks:
  - id: all-drives
    kind: fio
    params:
      targets: [{a}, {b}, {slow}]
      jobs: [{{name: rr, rw: randread, bs: 4k, iodepth: 8, runtime: 1}}]
""")
    profile = write(tmp_path / "p.yaml", "name: p\n")
    with read_iops_limits({a: 400, b: 400, slow: 100}):
        r = harness("run", str(suite), "--profile", str(profile), "--output", str(tmp_path / "out"))
    assert r.returncode == 1, r.stdout + r.stderr
    (check,) = results(run_dirs(tmp_path / "out")[0])["checks"]
    assert check["status"] == "failed"
    (ev,) = check["evaluations"]
    assert ev["outcome"] == "fail" and ev["labels"]["device"] == Path(slow).name
    assert ev["source"] == "sibling rule"


def test_writes_need_both_opt_ins_and_every_device_must_pass_the_guard(loops, tmp_path):
    a, b = loops.make(), loops.make()
    p = FioParams.model_validate({"targets": [a, b], "jobs": [WRITE]})
    for destructive, allow in ((False, True), (True, False)):
        with pytest.raises(GuardRefusal, match=r"refusing to write to .*missing"):
            run_judged(KIND, p, ctx(tmp_path / "r", destructive, allow))
    subprocess.run(["mkfs.ext4", "-q", b], check=True, capture_output=True)  # b now holds data
    b_before = head(b)
    with pytest.raises(GuardRefusal, match=rf"refusing to write to {b}: ext4 signature found"):
        run_judged(KIND, p, ctx(tmp_path / "r", True, True))
    assert head(a) == ZERO_8M and head(b) == b_before  # one refusal stops all: nothing written


def test_writes_with_both_opt_ins_on_blank_devices(loops, tmp_path):
    a, b = loops.make(), loops.make()
    c = ctx(tmp_path / "run", True, True)
    out = run_judged(KIND, FioParams.model_validate({"targets": [a, b], "jobs": [WRITE]}), c)
    assert out.problems == ()
    assert {(m.labels["device"], m.labels["rw"]) for m in out.metrics if m.name == "fio.bw"} == {
        (Path(a).name, "write"), (Path(b).name, "write")}
    assert "--readonly" not in c.tool_runs[0].argv
    assert head(a) != ZERO_8M and head(b) != ZERO_8M
    assert out.evaluations == ()  # two siblings are too few to name an outlier


def test_small_files_cannot_run_on_devices(loops, tmp_path):
    p = FioParams.model_validate({"targets": [loops.make()], "preset": "small-files"})
    with pytest.raises(ToolError, match="needs a directory target"):
        run_judged(KIND, p, ctx(tmp_path))
