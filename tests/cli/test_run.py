"""`harness run` end to end: real fio, real subprocesses, exit codes, run directory contents."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from clihelp import PASS_PROFILE, QUICK_FIO, harness, results, run_dirs, write

from harness.results import validate


@pytest.fixture()
def quick(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "quick.yaml", QUICK_FIO), write(tmp_path / "lenient.yaml", PASS_PROFILE)


def test_accepted_run_writes_a_complete_run_directory(tmp_path: Path, quick):
    suite, profile = quick
    out = tmp_path / "reports"
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = run_dirs(out)
    assert "ACCEPTED: 2 passed" in r.stdout
    assert f"report: {run_dir / 'report.html'}" in r.stdout
    doc = results(run_dir)
    assert validate(doc) == []
    assert doc["verdict"] == "ACCEPTED" and doc["format_version"] == 1
    prof = dict(doc["profile"])
    assert prof.pop("digest").startswith("sha256:")  # what --resume compares
    assert prof.pop("file") == str(profile.resolve())  # and reloads, from any working directory
    assert prof == {"name": "lenient", "path": str(profile), "reason": "given with --profile",
                    "chain": ["lenient"], "from": "given as a path"}
    fio = next(c for c in doc["checks"] if c["id"] == "fio")
    names = {(m["name"], m["labels"]["job"], m["labels"]["rw"]) for m in fio["metrics"]}
    assert ("fio.iops", "randread_4k", "read") in names and ("fio.bw", "seqwrite_1m", "write") in names
    assert [e["outcome"] for e in fio["evaluations"]] == ["pass", "pass"]
    inv = next(c for c in doc["checks"] if c["id"] == "inventory")
    assert [e["metric"] for e in inv["evaluations"]] == ["host.memory"]
    for f in ("report.html", "junit.xml", "harness.log", "checks/fio.json", "checks/inventory.json"):
        assert (run_dir / f).is_file(), f
    (tool,) = fio["tool_runs"]
    assert tool["argv"][0].endswith("fio") and (run_dir / tool["stdout_file"]).exists()
    assert list((run_dir / "raw" / "fio").iterdir())
    assert ET.parse(run_dir / "junit.xml").getroot().find("testsuite").get("failures") == "0"


def test_failed_expectation_rejects_with_exit_1(tmp_path: Path, quick):
    suite, _ = quick
    profile = write(tmp_path / "strict.yaml", "name: strict\nexpectations:\n"
                    "  - {metric: fio.iops, labels: {job: randread_4k}, min: 1.0e12, unit: IOPS}\n")
    out = tmp_path / "r"
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(out))
    assert r.returncode == 1, r.stderr
    assert "REJECTED" in r.stdout and "FAILED fio" in r.stdout
    assert "expected >= 1,000,000,000,000 IOPS" in r.stdout  # one formatter: no scientific notation
    (run_dir,) = run_dirs(out)
    suite_el = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert suite_el.get("failures") == "1"


def test_missing_tool_is_an_error_not_a_failure(tmp_path: Path):
    suite = write(tmp_path / "s.yaml", "name: s\nchecks:\n  - id: tool\n    kind: command\n"
                  "    params: {argv: [no-such-benchmark-tool]}\n")
    out = tmp_path / "r"
    r = harness("run", str(suite), "--profile", "generic", "--output", str(out))
    assert r.returncode == 3, r.stdout + r.stderr  # no hardware verdict: not 1 (rejected)
    (run_dir,) = run_dirs(out)
    doc = results(run_dir)
    (chk,) = doc["checks"]
    assert chk["status"] == "errored" and "no-such-benchmark-tool not found" in chk["message"]
    assert doc["verdict"] == "ERRORED" and "ERRORED: 0 passed" in r.stdout
    assert "No hardware verdict: 1 check could not run validly" in (run_dir / "report.html").read_text()


def test_gpu_check_skipped_without_nvml_but_errored_when_profile_expects_gpus(tmp_path: Path):
    suite = write(tmp_path / "s.yaml", "name: s\nchecks:\n  - id: gpu-thing\n    kind: command\n"
                  "    needs: [gpu]\n    params: {argv: [nvidia-smi]}\n")
    out = tmp_path / "a"
    r = harness("run", str(suite), "--profile", "generic", "--output", str(out))
    assert r.returncode == 4, r.stdout + r.stderr  # skipped as not applicable, yet nothing was judged
    (chk,) = results(run_dirs(out)[0])["checks"]
    assert chk["status"] == "skipped" and chk["message"].startswith("no NVIDIA GPU: NVML not loadable")
    out = tmp_path / "b"
    r = harness("run", str(suite), "--profile", "h100-sxm-8x", "--output", str(out))
    assert r.returncode == 3
    (chk,) = results(run_dirs(out)[0])["checks"]
    assert chk["status"] == "errored"
    assert chk["message"].startswith("profile expects 8 x NVIDIA H100 80GB HBM3, found 0")


def test_dry_run_prints_commands_and_expectations_and_runs_nothing(tmp_path: Path, quick):
    suite, profile = quick
    out = tmp_path / "r"
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(out), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "$ fio --output-format=json" in r.stdout
    assert "--name=randread_4k" in r.stdout
    assert "expect fio.iops{job=randread_4k,rw=read} each: >= 10 IOPS" in r.stdout
    assert not out.exists()


def test_only_and_skip(tmp_path: Path, quick):
    suite, profile = quick
    out = tmp_path / "r"
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(out), "--only", "inventory")
    assert r.returncode == 0
    assert [c["id"] for c in results(run_dirs(out)[0])["checks"]] == ["inventory"]
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(out), "--only", "nope")
    assert r.returncode == 2 and "unknown check id(s) nope" in r.stderr and "has: inventory, fio" in r.stderr
    r = harness("run", str(suite), "--skip", "inventory,fio", "--output", str(out))
    assert r.returncode == 2 and "left no check" in r.stderr
    # repeated options add up (the last one used to win silently)
    r = harness("run", str(suite), "--skip", "inventory", "--skip", "fio", "--output", str(out))
    assert r.returncode == 2 and "left no check" in r.stderr
    r = harness("run", str(suite), "--only", "inventory", "--only", "nope", "--output", str(out))
    assert r.returncode == 2 and "unknown check id(s) nope" in r.stderr


def test_invalid_inputs_exit_2_with_file_line(tmp_path: Path):
    suite = write(tmp_path / "bad.yaml", "name: bad\nchecks:\n  - id: a\n    kind: fio\n    tmeout: 5\n")
    r = harness("run", str(suite), "--output", str(tmp_path / "r"))
    assert r.returncode == 2
    assert f"{suite}:5:5: " in r.stderr and "did you mean 'timeout'" in r.stderr
    r = harness("run", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "missing.yaml" in r.stderr
    r = harness("run", "--profile", "no-such-profile", "--dry-run")
    assert r.returncode == 2 and "no-such-profile" in r.stderr
    r = harness("run", "--bogus-flag")
    assert r.returncode == 2 and "No such option" in r.stderr


def test_report_rerenders_from_results(tmp_path: Path, quick):
    suite, profile = quick
    out = tmp_path / "r"
    harness("run", str(suite), "--profile", str(profile), "--output", str(out), "--only", "inventory")
    (run_dir,) = run_dirs(out)
    (run_dir / "report.html").unlink()
    (run_dir / "junit.xml").unlink()
    r = harness("report", str(run_dir))
    assert r.returncode == 0 and r.stdout.startswith("ACCEPTED: ")
    assert (run_dir / "report.html").stat().st_size > 1000 and (run_dir / "junit.xml").exists()
    (run_dir / "results.json").write_text('{"format_version": 99}')
    r = harness("report", str(run_dir))
    assert r.returncode == 2 and "format_version: 99 is not supported" in r.stderr


def test_validate_schema_parse_list():
    root = Path(__file__).resolve().parents[2]
    files = [str(p) for d in ("suites", "profiles") for p in sorted((root / d).glob("*.yaml"))]
    r = harness("validate", *files)
    assert r.returncode == 0, r.stderr
    schema = json.loads(harness("schema", "suite").stdout)
    assert "fio" in json.dumps(schema) and "inventory" in json.dumps(schema)
    assert json.loads(harness("schema", "results").stdout)["title"] == "harness results.json"
    sample = root / "tests/data/fio/fio3.28_json_randrw_gtod_reduce_k8s.json"
    parsed = json.loads(harness("parse", "fio", str(sample)).stdout)
    assert parsed["kind"] == "fio" and parsed["valid"] is True and parsed["metrics"]
    r = harness("parse", "fioo", "x")
    assert r.returncode == 2 and "did you mean 'fio'" in r.stderr
    listing = harness("list").stdout
    for word in ("inventory", "fio", "command", "smoke", "generic", "h100-sxm-8x"):
        assert word in listing
    kinds = listing.split("parse kinds:")[0].splitlines()[1:]
    starts = {len(ln) - len(ln.split(None, 1)[1]) for ln in kinds}
    assert len(kinds) >= 17 and len(starts) == 1, kinds  # one column for every description


def test_default_run_uses_smoke_and_auto_profile(tmp_path: Path):
    """`harness run` with no arguments, as the README's first command does it."""
    r = harness("run", "--output", str(tmp_path / "reports"), timeout=300)
    assert r.returncode in (0, 1), r.stderr
    (run_dir,) = run_dirs(tmp_path / "reports")
    doc = results(run_dir)
    assert doc["suite"]["name"] == "smoke"
    assert doc["profile"]["name"] == "generic"
    assert doc["profile"]["reason"].startswith("auto: no NVIDIA GPU on the PCI bus")
    fio = next(c for c in doc["checks"] if c["id"] == "fio-quick")
    assert fio["status"] in ("passed", "warned", "failed") and len(fio["evaluations"]) == 5
    assert run_dir.name.startswith(doc["host"] + "-") and run_dir.name == doc["run_id"]


def test_run_help_states_the_exit_codes_ci_can_use():
    r = harness("run", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert ("Exit status: 0 accepted, 1 rejected (the hardware measured badly), 2 invalid input, "
            "3 errored (a tool, the environment or the harness failed: no hardware verdict), 4 untested "
            "(no check judged anything, or an expected check was skipped or left out by "
            "--only/--skip/--tags), 130/143 interrupted.") in text
