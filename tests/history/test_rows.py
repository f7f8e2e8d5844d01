"""history.rows: a node's runs that repeat one identity share one read of it, and a tampered
identity is refused every time it is read (a refusal is never remembered as a reading)."""

from __future__ import annotations

import json

import pytest

from harness.history import rows
from harness.history.identity import changes

IDENT = {"hostname": "gpu01", "system_serial": "SN1", "gpus": [{"index": 0, "serial": "G0", "name": "H100"}],
         "nvme_serials": ["N1"], "software": {"driver": "550.54"}, "machine_id": "m1"}


def test_one_identity_text_is_read_once_and_compares_without_a_walk():
    text = json.dumps(IDENT)
    a, b = rows.identity(text), rows.identity(str(text))
    assert a is b and a.hostname == "gpu01" and a.gpus[0].serial == "G0"
    assert changes(a, b) == []
    other = rows.identity(json.dumps({**IDENT, "software": {"driver": "560.35"}}))
    assert [c.kind for c in changes(a, other)] == ["software"]


@pytest.mark.parametrize("bad", [json.dumps({**IDENT, "gpus": "all"}), "{", 7])
def test_a_tampered_identity_is_refused_each_time(bad: object):
    for _ in range(2):
        with pytest.raises(rows.BadRow, match="identity"):
            rows.identity(bad)
