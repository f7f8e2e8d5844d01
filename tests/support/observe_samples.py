"""An observe check's saved window and result: a network stall, with hostile device and process names."""

from __future__ import annotations

import json
from pathlib import Path

from harness.model import CheckResult, Status
from harness.series.observed import Net, Tick, Window
from harness.series.stall import diagnose

EVIL = '<img src=x onerror="alert(1)">'


def window() -> Window:
    ticks = tuple(Tick(t=float(i + 1), dt=1.0, tcp_send=1e6, tcp_out=1000.0, tcp_retrans=0.0,
                       net={EVIL: Net(rx_bps=1e5, tx_bps=2.5e6, drops=0.0)}) for i in range(5))
    return Window("command", "2026-12-01T00:00:00Z", 5.0, 1.0, ticks, pids=(7,))


def check(run_dir: Path, w: Window, series_file: str = "raw/obs/observe-series.json") -> CheckResult:
    d = diagnose(w)
    (run_dir / "raw" / "obs").mkdir(parents=True, exist_ok=True)
    (run_dir / "raw" / "obs" / "observe-series.json").write_text(json.dumps(w.to_dict()))
    findings = [f.to_dict() for f in d.findings]
    findings[0]["processes"] = [{"pid": 7, "comm": f"<script>{EVIL}", "what": "sleeping"}]
    return CheckResult("obs", "observe", Status.PASSED, d.verdict,
                       details={"primary": d.primary, "verdict": d.verdict, "findings": findings,
                                "series": {"file": series_file}})
