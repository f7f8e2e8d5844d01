"""Small RunRecords and node outcomes for the fleet tests (a node = one command check + inventory)."""

from __future__ import annotations

from harness.fleet.collect import NodeOutcome, NodeStatus, evidence_of, sku_of, status_of_record
from harness.model import CheckResult, Evaluation, Metric, Outcome, RunRecord, Status


def record(node: str, bw: float, *, errors: int = 0, min_bw: float = 50.0, cpus: int = 64,
           check_status: Status | None = None, finished: bool = True) -> RunRecord:
    """A node's run: app.bw (higher is better, >= min_bw) and app.errors (<= 0)."""
    evs = (
        Evaluation("app.bw", {"gpu": 0}, Outcome.PASS if bw >= min_bw else Outcome.FAIL, "fail", bw, "GB/s",
                   None, min_bw, None, "each", "" if bw >= min_bw else f"{bw} < {min_bw}", None, "suite"),
        Evaluation("app.errors", {}, Outcome.PASS if errors == 0 else Outcome.FAIL, "fail", float(errors),
                   "count", None, None, 0.0, "each", "", None, "suite"),
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
