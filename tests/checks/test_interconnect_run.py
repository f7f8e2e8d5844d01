"""A suite with nccl and gpu_bandwidth checks, end to end through the runner, compare and report.

The nccl-tests and nvbandwidth binaries are stand-ins that print real captured output (no GPU
here); everything else is the real harness: suite and profile files, needs, evaluations, the
sibling rule, results.json and the HTML report with its busbw chart (opened in Chromium when
it is installed).
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from harness.run import session as app

DATA = Path(__file__).parents[1] / "data"
H100_NCCL = DATA / "nccl-tests" / "all_reduce_h100_2node_16rank_oci.txt"
H100_D2H = DATA / "nvbandwidth" / "nvbandwidth_v0.10.0_8x_h100_device_to_host_memcpy_ce.txt"
INVENTORY = {"host": {"hostname": "gpu-node-1"},
             "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}
CHROMIUM = Path("/usr/bin/chromium")


def executable(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def setup(tmp_path: Path, busbw_min: float) -> tuple[Path, Path]:
    bins = tmp_path / "bin"
    executable(bins / "all_reduce_perf", f'cat "{H100_NCCL}"\n')
    nvb = executable(bins / "nvbandwidth", f'cat "{H100_D2H}"\n')
    suite = tmp_path / "interconnect.yaml"
    suite.write_text(f"""\
name: interconnect
checks:
  - id: nccl-8gpu
    kind: nccl
    params: {{bin_dir: "{bins}", minbytes: 1G, maxbytes: 16G, env: {{NCCL_DEBUG: WARN}}}}
  - id: pcie
    kind: gpu_bandwidth
    params: {{binary: "{nvb}", tests: [device_to_host_memcpy_ce]}}
""")
    profile = tmp_path / "lab.yaml"
    profile.write_text(f"""\
name: lab-h100
expectations:
  - metric: nccl.busbw
    labels: {{op: all_reduce, size: 17179869184, placement: out-of-place}}
    reference: 480
    lower: 0.05
    min: {busbw_min}
    unit: GB/s
  - {{metric: gpu.d2h_bw, labels: {{test: device_to_host_memcpy_ce}}, min: 52, unit: GB/s}}
""")
    return suite, profile


def run(tmp_path: Path, busbw_min: float) -> tuple[int, Path]:
    suite, profile = setup(tmp_path, busbw_min)
    out = tmp_path / "reports"
    code = app.run(suite=str(suite), profile=str(profile), output=out, inventory_probe=lambda: INVENTORY)
    (run_dir,) = [p for p in out.iterdir() if (p / "results.json").is_file()]
    return code, run_dir


def test_accepted_run_with_busbw_chart(tmp_path, capsys):
    code, run_dir = run(tmp_path, busbw_min=460)
    assert code == 0, capsys.readouterr().out
    doc = json.loads((run_dir / "results.json").read_text())
    nccl, pcie = doc["checks"]
    assert (nccl["status"], pcie["status"]) == ("passed", "passed")
    (ev,) = nccl["evaluations"]
    assert (ev["outcome"], ev["measured"], ev["low"], ev["reference"]) == ("pass", 464.57, 460, 480)
    assert nccl["details"]["env"]["NCCL_DEBUG"] == "WARN"
    outcomes = [(e["metric"], e["outcome"], e["source"]) for e in pcie["evaluations"]]
    assert outcomes == ([("gpu.d2h_bw", "pass", "lab-h100")] * 8
                        + [("gpu.d2h_bw", "pass", "sibling rule")])
    assert sorted(e["labels"]["gpu"] for e in pcie["evaluations"][:8]) == list(range(8))
    html = (run_dir / "report.html").read_text()
    assert html.count("<svg") >= 1 and "Bus bandwidth by message size" in html
    assert "min 460 GB/s at 16 GiB (all_reduce out-of-place) — lab-h100" in html


def test_busbw_below_the_profile_rejects_and_names_the_row(tmp_path, capsys):
    code, run_dir = run(tmp_path, busbw_min=470)
    assert code == 1
    out = capsys.readouterr().out
    assert "FAILED nccl-8gpu" in out
    assert "nccl.busbw{dtype=float,op=all_reduce,placement=out-of-place,redop=sum,size=17179869184}: " \
           "measured 465 GB/s, expected >= 470 GB/s (reference 480 GB/s)" in out
    assert "min 470 GB/s at 16 GiB" in (run_dir / "report.html").read_text()


def test_without_gpus_the_checks_are_skipped(tmp_path, capsys):
    suite, profile = setup(tmp_path, busbw_min=460)
    out = tmp_path / "reports"
    code = app.run(suite=str(suite), profile=str(profile), output=out,
                   inventory_probe=lambda: {"host": {"hostname": "cpu-box"}, "gpus": [],
                                            "nvml": {"reason": "NVML not loadable"}})
    assert code == 4  # UNTESTED: every check skipped, nothing was measured (#20)
    (run_dir,) = [p for p in out.iterdir() if (p / "results.json").is_file()]
    doc = json.loads((run_dir / "results.json").read_text())
    assert [(c["status"], c["message"]) for c in doc["checks"]] == [
        ("skipped", "no NVIDIA GPU: NVML not loadable")] * 2


@pytest.mark.skipif(not CHROMIUM.exists(), reason="chromium not installed")
def test_chart_renders_in_chromium(tmp_path, capsys):
    from playwright.sync_api import sync_playwright

    _, run_dir = run(tmp_path, busbw_min=460)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors: list[str] = []
        requests: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto((run_dir / "report.html").as_uri(), wait_until="load")
        box = page.locator("div.chart svg").bounding_box()
        threshold = page.locator("div.chart path.threshold").first.bounding_box()
        browser.close()
    assert errors == [] and [r for r in requests if not r.startswith("file:")] == []
    assert box is not None and box["width"] > 300 and box["height"] > 200
    assert threshold is not None and threshold["width"] > 200
