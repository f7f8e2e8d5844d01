"""One way to write labels: model.join_labels (and report.fmt.fmt_labels, its braced form)."""

from __future__ import annotations

from harness.model import join_labels
from harness.report.fmt import fmt_labels


def test_labels_keep_the_order_given_from_a_mapping_or_pairs() -> None:
    assert join_labels({"gpu": 1, "dir": "h2d"}) == "gpu=1,dir=h2d"
    assert join_labels([("b", 2), ("a", "x")]) == "b=2,a=x"
    assert join_labels(sorted({"b": 2, "a": "x"}.items())) == "a=x,b=2"


def test_braces_only_when_there_are_labels() -> None:
    assert join_labels({}) == "" and join_labels({}, braces=True) == "" and fmt_labels({}) == ""
    assert join_labels({"gpu": 0}, braces=True) == fmt_labels({"gpu": 0}) == "{gpu=0}"
    assert join_labels(iter([("gpu", 0)]), braces=True) == "{gpu=0}"  # a one-shot iterator
