"""The config audit through the real `harness` command: capture a golden config and pass it,
fail a mismatch with found and expected, validation with did-you-mean, dry-run and the report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write

AUDIT_ONLY = """\
name: audit
checks:
  - id: config-audit
    kind: config_audit
"""


def audit_check(run_dir: Path) -> dict:
    (c,) = [c for c in results(run_dir)["checks"] if c["kind"] == "config_audit"]
    return c


def test_capture_then_a_second_run_on_the_same_machine_passes(tmp_path):
    golden = tmp_path / "profiles" / "site-golden.yaml"
    cap = harness("audit", "capture", "--output", str(golden), "--extends", "generic")
    assert cap.returncode == 0, cap.stderr
    n = int(re.search(r": (\d+) config rules", cap.stdout).group(1))
    assert n >= 20
    text = golden.read_text()
    assert text.startswith("# Golden config captured by `harness audit capture`")
    assert "name: site-golden\nextends: generic\n" in text
    assert "{fact: host.shm_bytes, min: " in text
    suite = write(tmp_path / "audit.yaml", AUDIT_ONLY)
    run = harness("run", str(suite), "--profile", str(golden), "--output", str(tmp_path / "out"))
    assert run.returncode == 0, run.stdout + run.stderr
    c = audit_check(run_dirs(tmp_path / "out")[0])
    outcomes = c["details"]["audit"]["outcomes"]
    assert {o["rule_source"] for o in outcomes} == {"site-golden"}  # the merged profile's name
    assert sum(o["outcome"] == "pass" for o in outcomes) >= n
    # every rule the capture wrote passes on the node it came from; what it refused to bless (a clock
    # not synchronised on this VM, say) keeps the parent's rule, and only those may warn
    refused = set(re.findall(r"warning: not captured: (\S+) = ", cap.stdout + cap.stderr))
    warned = {o["fact"] for o in outcomes if o["outcome"] == "warn"}
    assert warned <= refused, (warned, refused)
    assert {o["outcome"] for o in outcomes} <= {"pass", "skip", "warn"}  # skip: a rule on an unknown fact
    assert c["status"] == ("warned" if warned else "passed")
    # generic's rule on THP is replaced by the golden file's (merge by fact name)
    assert [o["expected"] for o in outcomes if o["fact"] == "host.thp"] == [
        next(o["found"] for o in outcomes if o["fact"] == "host.thp")]


def test_capture_refuses_to_overwrite_without_force(tmp_path):
    out = write(tmp_path / "golden.yaml", "name: keep\n")
    r = harness("audit", "capture", "-o", str(out))
    assert r.returncode == 2 and "exists; give --force" in r.stderr
    assert out.read_text() == "name: keep\n"
    r = harness("audit", "capture", "-o", str(out), "--force", "--name", "golden-2")
    assert r.returncode == 0, r.stderr
    assert "name: golden-2\n" in out.read_text()


def test_a_mismatch_fails_with_found_and_expected(tmp_path):
    profile = write(tmp_path / "huge-shm.yaml", "name: huge-shm\nconfig:\n"
                    "  - {fact: host.shm_bytes, min: 1PiB, note: training data loaders}\n"
                    "  - {fact: host.kernel, min_version: '3.10'}\n")
    suite = write(tmp_path / "audit.yaml", AUDIT_ONLY)
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(tmp_path / "out"))
    assert r.returncode == 1
    assert "FAILED config-audit" in r.stdout
    line = next(ln for ln in r.stdout.splitlines() if "host.shm_bytes" in ln)
    # the one formatter's bytes: exact when a unit divides them, else four digits ('23.59 GiB')
    assert re.search(r"found [\d.,]+ (MiB|GiB)", line) and "expected >= 1 PiB" in line
    assert not re.search(r"\d{4,} B\b", line), line
    run_dir = run_dirs(tmp_path / "out")[0]
    c = audit_check(run_dir)
    assert c["status"] == "failed"
    (ev,) = [e for e in c["evaluations"] if e["metric"] == "host.shm_bytes"]
    assert ev["outcome"] == "fail" and ev["unit"] == "B" and ev["low"] == 1024**5
    assert ev["measured"] == next(m["value"] for m in c["metrics"] if m["name"] == "host.shm_bytes")
    html = (run_dir / "report.html").read_text()
    assert "Configuration audit" in html and "training data loaders" in html
    assert "expected &gt;= 1 PiB" in html or "expected >= 1 PiB" in html
    assert ">Expectations<" not in html  # the audit's table replaces the generic one


def test_gpu_rules_error_when_the_profile_expects_gpus_that_are_not_there(tmp_path):
    if Path("/dev/nvidiactl").exists():
        pytest.skip("this machine has an NVIDIA driver")
    profile = write(tmp_path / "gpu.yaml", "name: gpu-node\nhardware:\n"
                    "  gpu: {models: [NVIDIA H100 80GB HBM3], count: 8}\n"
                    "config:\n  - {fact: gpu.driver_version, min_version: '550.54.15'}\n")
    suite = write(tmp_path / "audit.yaml", AUDIT_ONLY)
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(tmp_path / "out"))
    assert r.returncode == 3
    c = audit_check(run_dirs(tmp_path / "out")[0])
    assert c["status"] == "errored"
    (ev,) = c["evaluations"]
    assert ev["outcome"] == "error"
    assert ev["message"].startswith("profile expects 8 x NVIDIA H100 80GB HBM3, "
                                    "but gpu.driver_version is unknown")


def test_validate_names_unknown_facts_with_a_suggestion(tmp_path):
    bad = write(tmp_path / "bad.yaml", "name: bad\nconfig:\n  - {fact: host.memlok, equals: unlimited}\n"
                "  - {fact: gpu.driver_version, equals: 535.10}\n")
    r = harness("validate", str(bad))
    assert r.returncode == 2
    assert (f"{bad}:3:12: config[0].fact: unknown fact 'host.memlok' "
            "(did you mean 'host.memlock'?)") in r.stderr
    assert f"{bad}:4:5:" in r.stderr and "quote 535.1" in r.stderr


def test_quick_suite_starts_with_the_audit_and_dry_run_lists_its_rules():
    r = harness("run", "quick", "--profile", "h100-sxm-8x", "--dry-run")
    assert r.returncode == 0, r.stderr
    checks = re.findall(r"^\d+\. (\S+)\s+\[(\S+)\]", r.stdout, re.M)
    assert checks[0] == ("config-audit", "config_audit") and ("inventory", "inventory") in checks
    assert "config gpu.fabricmanager_running: true  [fail; h100-sxm-8x]" in r.stdout
    assert "config host.memlock: unlimited  [fail; h100-sxm-8x]" in r.stdout
    assert "config host.thp: one of madvise, never  [warn; h100-sxm-8x]" in r.stdout  # from generic


def test_junit_says_found_and_expected_once_and_tells_twin_rules_apart(tmp_path):
    """Config cases started 'measured nothing, expected any', repeated their line, and the two
    host.shm_bytes rules (fail below 256 MiB, warn below 1 PiB) were two cases of one name."""
    import xml.etree.ElementTree as ET

    profile = write(tmp_path / "p.yaml", "name: p\nconfig:\n"
                    "  - {fact: host.shm_bytes, min: 256MiB}\n"
                    "  - {fact: host.shm_bytes, min: 1PiB, severity: warn}\n"
                    "  - {fact: host.thp, one_of: [madvise, never, always]}\n"
                    "  - {fact: host.nofile, min: 99999999999}\n")
    suite = write(tmp_path / "audit.yaml", AUDIT_ONLY)
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(tmp_path / "out"))
    assert r.returncode == 1, r.stderr
    root = ET.parse(run_dirs(tmp_path / "out")[0] / "junit.xml").getroot()
    tcs = [c for c in root.iter("testcase") if c.get("classname") == "config-audit"]
    names = [c.get("name") for c in tcs]
    assert "host.shm_bytes (>= 256 MiB)" in names and "host.shm_bytes (>= 1 PiB, warn)" in names
    assert len(names) == len(set(names)), names
    for tc in tcs:
        for child in tc:
            text = child.text or ""
            assert "measured nothing" not in text and "expected any" not in text, (tc.get("name"), text)
            lines = [ln for ln in text.splitlines() if ln]
            assert len(lines) == len(set(lines)), text
            assert not re.search(r"\d{5,}", text), text  # numbers through the one formatter
    nofile = next(tc for tc in tcs if tc.get("name") == "host.nofile")
    fail = nofile.find("failure")
    assert fail is not None and fail.get("message", "").endswith("expected >= 99,999,999,999"), fail.attrib
