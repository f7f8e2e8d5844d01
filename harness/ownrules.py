"""How a check kind's own rules (`CheckKind.own_rules`) read in --dry-run. Pure.

One list serves both ends: the runner hands `PlannedCheck.own_rules` to compare.judge and
--dry-run prints `describe(rule)` for each, so what the plan shows and what the check is judged
by cannot disagree. Two shapes: a compare.Rule (fixed bounds and a source, e.g. nic_ports'
`max_error_delta`) and a siblings.SiblingRule (bounds from the median of the siblings, known only
at run time, so described by its tolerance).
"""

from __future__ import annotations

from harness import siblings
from harness.compare import OwnRule, band, describe_band, sibling_rule

__all__ = ["OwnRule", "describe"]


def describe(rule: OwnRule) -> str:
    """One dry-run line, unindented: 'expect net.error_delta{} each: <= 0 count  [warn; check param
    max_error_delta 0]', 'expect rdma.bw_avg{} by device: >= 0.9 x the median of its siblings
    (3 or more)  [fail; sibling rule]'."""
    if isinstance(rule, siblings.SiblingRule):
        return f"expect {rule.metric}{{}} by {','.join(rule.vary)}: {rule.describe()}  " \
               f"[{rule.severity}; {siblings.SOURCE}]"
    ex = rule.expectation
    sel = ",".join(f"{k}={v}" for k, v in sorted(ex.labels.items()))
    if ex.sibling is not None:
        sib = sibling_rule(ex)
        what = f"by {','.join(sib.vary)}: {sib.describe(ex.unit)}"
    else:
        what = f"{ex.reduce}: {describe_band(*band(ex), ex.unit)}"
    flags = "".join(f", {f}" for f, on in (("xfail", ex.xfail), ("if measured", ex.if_measured)) if on)
    return f"expect {ex.metric}{{{sel}}} {what}  [{ex.severity}{flags}; {rule.source}]"
