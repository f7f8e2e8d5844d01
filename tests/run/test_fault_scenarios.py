"""Fault scenarios end to end (issue 24): a node faked at its GPU edges (fake NVML, NumPy stand-ins
for the burn's devices, a fake dmesg) on which a fault unfolds during a real `harness run -q` of the
acceptance suite's GPU checks (tests/support/faultscenario.py). Each asserts the verdict, the exit
code, the GPU named on page 1 of report.html and in the quiet line, and that the run ended within
its bound with its outputs written."""

from __future__ import annotations

from pathlib import Path

import pytest
from faultscenario import H200, Run, pci, run, xid_line

EIGHT = 8
BOUND_S = 150.0  # every scenario ends well inside this (each wait bounded); the test fails past it


def gpus(**faulty: dict) -> list[dict]:
    """Eight healthy fake H200s, with the given fields on GPU N (`g3={...}`)."""
    return [{**H200, **faulty.get(f"g{i}", {})} for i in range(EIGHT)]


def written(r: Run) -> None:
    """The run ended by itself, in its bound, with every output written and agreeing."""
    assert r.seconds < BOUND_S
    assert r.record["suite"]["name"] == "acceptance"
    for name in ("results.json", "report.html", "junit.xml", "harness.log"):
        assert (r.run_dir / name).is_file(), name
    verdict = r.record["verdict"]
    assert r.quiet.startswith(f"harness: {verdict}: "), r.quiet
    assert r.code == {"ACCEPTED": 0, "REJECTED": 1, "ERRORED": 3, "UNTESTED": 4}[verdict], r.stderr[-2000:]
    assert verdict in r.page_one() or verdict.lower() in r.page_one().lower()


def rejected_naming(r: Run, gpu: int, check: str) -> None:
    written(r)
    assert (r.code, r.record["verdict"]) == (1, "REJECTED"), (r.quiet, r.stderr[-2000:])
    assert r.check(check)["status"] == "failed", r.check(check)["message"]
    assert f"gpu={gpu}" in r.quiet or f"GPU {gpu}" in r.quiet, r.quiet
    assert f"GPU {gpu}" in r.page_one() or f"gpu={gpu}" in r.page_one()


def test_a_gpu_falls_off_the_bus_mid_burn(tmp_path: Path):
    """GPU 3 falls off the bus 1 s into the burn: NVML loses it, its burn process errors, the driver
    logs Xid 79. Before: the burn was 'invalid' (ERRORED, exit 3) and no GPU was named."""
    r = run(tmp_path, gpus(g3={"lost_after": 12}), burn_faults={3: {
        "after_s": 1.0, "do": "raise", "message": "CUDA error: unspecified launch failure",
        "xid": xid_line(3, 79, "GPU has fallen off the bus.")}})
    rejected_naming(r, 3, "gpu-burn")
    fails = r.fails("gpu-burn")
    assert fails[("gpu_burn.ok", 3)].startswith(f"GPU 3 ({pci(3)}): did not finish the burn: ")
    assert fails[("gpu.lost", 3)].startswith(f"GPU 3 ({pci(3)}) stopped answering NVML")
    assert "critical XID" in fails[("gpu.xid_critical", 3)]
    burn = r.check("gpu-burn")
    ok = {m["labels"]["gpu"]: m["value"] for m in burn["metrics"] if m["name"] == "gpu_burn.ok"}
    assert ok == {**{g: 1.0 for g in range(EIGHT)}, 3: 0.0}  # the other seven kept their results
    assert burn["problems"]  # the run was not whole; still a hardware verdict


@pytest.mark.slow
def test_a_burn_child_stuck_unkillable_is_named_hung_and_the_run_ends(tmp_path: Path):
    """GPU 5's burn process stops answering 0.5 s in and SIGKILL does not take (uninterruptible
    sleep on a hung GPU). Before: p.kill(); p.wait() waited for ever, then the outer timeout threw
    every GPU's results away. Now: named hung at its own deadline, the wait after the kill bounded,
    the other seven judged."""
    r = run(tmp_path, gpus(), burn_faults={5: {"after_s": 0.5, "do": "unkillable"}}, duration=1, grace=2)
    rejected_naming(r, 5, "gpu-burn")
    fails = r.fails("gpu-burn")
    assert fails[("gpu_burn.ok", 5)].startswith(f"GPU 5 ({pci(5)}): did not finish the burn: hung: no result")
    assert [g for (metric, g) in fails if metric == "gpu_burn.ok"] == [5]
    raw = "".join(p.read_text() for p in (r.run_dir / "raw" / "gpu-burn").glob("*builtin*.stdout"))
    assert "did not die within" in raw  # said, and left behind; the harness reaped its process group


def test_an_nvml_call_that_never_returns_names_the_gpu(tmp_path: Path):
    """GPU 2's NVML reads stop returning mid-burn (a hung driver). Before: the sampler's join and
    the reads had no bound, the run hung with no record written. Now each reading is bounded: GPU 2
    is named hung, the others keep their telemetry, the run ends with its outputs."""
    r = run(tmp_path, gpus(g2={"hang_after": 8}))
    rejected_naming(r, 2, "gpu-burn")
    msg = r.fails("gpu-burn")[("gpu.lost", 2)]
    assert msg.startswith(f"GPU 2 ({pci(2)}) stopped answering NVML")
    assert "GPU is hung: NVML did not answer" in msg
    temps = {m["labels"]["gpu"] for m in r.check("gpu-burn")["metrics"] if m["name"] == "gpu.temp_max"}
    assert temps == set(range(EIGHT))


def test_a_lost_gpu_at_start_keeps_the_profile_and_rejects_the_node(tmp_path: Path):
    """GPU 6 is lost before the run (every query after its open fails). Before: the inventory went
    empty, or the automatic profile read its name as "None" and stopped (exit 2). Now the node is
    judged under h200-sxm-8x and REJECTED naming GPU 6 and its PCI address."""
    r = run(tmp_path, gpus(g6={"fault": 15}),
            burn_faults={6: {"after_s": None, "do": "raise",
                             "message": "CUDA error: no CUDA-capable device is detected"}})
    rejected_naming(r, 6, "gpu-health")
    assert r.record["profile"]["name"] == "h200-sxm-8x"
    inv = r.record["inventory"]["gpus"]
    assert len(inv) == EIGHT and inv[6]["pci_bus_id"] == pci(6) and inv[6]["error"]
    assert r.fails("gpu-health")[("gpu.lost", 6)].startswith(f"GPU 6 ({pci(6)}) does not answer NVML")
    assert r.check("gpu-burn")["status"] == "failed"


def test_counters_that_grow_under_the_load_fail_their_gpus(tmp_path: Path):
    """During the burn, with every burn process surviving: GPU 1's NVLink retrains and counts CRC
    errors (a flapping link), GPU 4's uncorrectable ECC count grows, and NVML asks for a reset of
    GPU 7 (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION). Before: health was read only before the burn, and
    NVLink errors and the recovery action never: ACCEPTED."""
    r = run(tmp_path, gpus(g1={"nvlink_errors": {"1": {"after": 5, "per_read": 1},
                                                 "2": {"after": 5, "per_read": 40}}},
                           g4={"ecc": {"1,0": {"after": 5, "per_read": 1}}},
                           g7={"recovery_action": {"after": 5, "then": 1}}))
    rejected_naming(r, 1, "gpu-burn")
    fails = r.fails("gpu-burn")
    assert set(fails) == {("gpu.health_growth", 1), ("gpu.health_growth", 4), ("gpu.recovery_action", 7)}
    assert "NVLink recoveries (a link retrained: a flapping NVLink) during the load" in \
        fails[("gpu.health_growth", 1)]
    assert fails[("gpu.health_growth", 4)].startswith(f"GPU 4 ({pci(4)}): ")
    assert "uncorrectable ECC errors during the load" in fails[("gpu.health_growth", 4)]
    assert fails[("gpu.recovery_action", 7)] == \
        f"GPU 7 ({pci(7)}): NVML asks for a recovery after the load: GPU reset required"
    warned = {(e["labels"].get("gpu"), e["labels"].get("counter"))
              for e in r.check("gpu-burn")["evaluations"] if e["outcome"] == "warn"}
    assert (1, "nvlink_crc") in warned
    page = r.page_one()
    assert all(f"GPU {g}" in page for g in (1, 4, 7))


def test_a_power_brake_assertion_fails_the_gpu(tmp_path: Path):
    """GPU 0 sees HW slowdown with the power-brake bit (an external power-brake signal: a PSU or
    the BMC) for a sustained stretch of the burn; the profile allows no HW slowdown."""
    r = run(tmp_path, gpus(g0={"reasons": {"after": 5, "every": 1000, "for": 20, "on": 0x8 | 0x80}}))
    rejected_naming(r, 0, "gpu-burn")
    assert ("gpu.throttle_pct", 0) in r.fails("gpu-burn")


def test_hw_slowdown_bursts_fail_the_gpu(tmp_path: Path):
    """Repeated sub-second HW slowdowns on GPU 7 (2 samples of every 10: a weak VR or PSU tripping
    NVML's fast trigger). Each is shorter than the 0.5 s a P-state change may show, and before they
    were erased; counted as episodes they fail GPU 7."""
    r = run(tmp_path, gpus(g7={"reasons": {"after": 3, "every": 10, "for": 2, "on": 0x8}}))
    rejected_naming(r, 7, "gpu-burn")
    assert ("gpu.hw_slowdown_episodes", 7) in r.fails("gpu-burn")


def test_a_pcie_nvl_card_is_accepted_with_its_links_disabled(tmp_path: Path):
    """H200 NVL cards without bridges: every NVLink reports disabled, which is not a fault (before,
    every GPU failed as '18 of 18 NVLink links are down'). The node is judged and ACCEPTED."""
    r = run(tmp_path, [{"name": "NVIDIA H200 NVL", "nvlinks_down": 18, "pcie": [5, 5, 16, 16]}
                       for _ in range(EIGHT)], profile="generic")
    written(r)
    assert (r.code, r.record["verdict"]) == (0, "ACCEPTED"), r.quiet
    assert r.check("gpu-health")["status"] == "passed" and r.check("gpu-burn")["status"] == "passed"
