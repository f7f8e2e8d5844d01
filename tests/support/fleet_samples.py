"""Small RunRecords and node outcomes for the fleet tests (a node = one command check + inventory)."""

from __future__ import annotations

from harness.fleet.collect import NodeOutcome, NodeStatus, evidence_of, sku_of, status_of_record
from harness.model import CheckResult, Evaluation, Metric, Outcome, RunRecord, Status


def record(node: str, bw: float, *, errors: int = 0, min_bw: float = 50.0, cpus: int = 64,
           check_status: Status | None = None, finished: bool = True) -> RunRecord:
    """A node's run: app.bw (higher is better, >= min_bw) and app.errors (<= 0)."""
    evs = (
        Evaluation(metric="app.bw", labels={"gpu": 0},
                   outcome=Outcome.PASS if bw >= min_bw else Outcome.FAIL, severity="fail", measured=bw,
                   unit="GB/s", reference=None, low=min_bw, high=None, reduce="each",
                   message="" if bw >= min_bw else f"{bw} < {min_bw}", source="suite"),
        Evaluation(metric="app.errors", labels={}, outcome=Outcome.PASS if errors == 0 else Outcome.FAIL,
                   severity="fail", measured=float(errors), unit="count", reference=None, low=None,
                   high=0.0, reduce="each", message="", source="suite"),
    )
    failed = any(e.outcome is Outcome.FAIL for e in evs)
    app = CheckResult("app", "command", check_status or (Status.FAILED if failed else Status.PASSED),
                      "errored: tool crashed" if check_status is Status.ERRORED else "",
                      "2026-11-29T10:00:01Z", 2.0,
                      (Metric("app.bw", bw, "GB/s", {"gpu": 0}),
                       Metric("app.errors", float(errors), "count")),
                      evs if check_status is not Status.ERRORED else ())
    inv = CheckResult("inventory", "inventory", Status.PASSED, "", "2026-11-29T10:00:00Z", 0.1,
                      (Metric("host.cpu_cores", float(cpus), "count"),))
    return RunRecord(f"{node}-20261129T100000Z", "vm", {"name": "fleet-test"}, {"name": "lenient"},
                     "2026-11-29T10:00:00Z", "2026-11-29T10:00:03Z" if finished else "", 3.0,
                     {"cpu": {"model": "AMD EPYC", "online": 2}, "gpus": []}, (inv, app), "0.1.0",
                     interrupted=not finished)


def outcome(node: str, rec: RunRecord | None, status: NodeStatus | None = None, reason: str = "",
            job_id: str = "1") -> NodeOutcome:
    if rec is None:
        return NodeOutcome(node, status or NodeStatus.ERRORED, reason or "job failed", job_id, "FAILED")
    return NodeOutcome(node, status or status_of_record(rec), reason or "ok", job_id, "COMPLETED",
                       f"nodes/{node}/run", sku_of(rec), evidence_of(rec), rec)
