"""base.check_json_depth: JSON nested past MAX_JSON_DEPTH is refused before json recurses; a
document with too few brackets to nest that deep is not walked at all, and brackets inside
strings never count."""

from __future__ import annotations

import json

import pytest

from harness.parsers import base
from harness.parsers.base import MAX_JSON_DEPTH, json_document


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def test_the_limit_itself_is_read_and_one_more_level_is_refused():
    assert json_document(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(ValueError, match=f"nested {MAX_JSON_DEPTH + 1} levels deep"):
        json_document(nested(MAX_JSON_DEPTH + 1))
    with pytest.raises(ValueError, match="levels deep"):
        json_document("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))


def test_brackets_in_strings_do_not_nest():
    doc = {"s": "{[" * 500, "t": [{"u": "]]}}"}]}
    assert json_document(json.dumps(doc)) == doc


def test_a_document_with_few_brackets_is_not_walked(monkeypatch: pytest.MonkeyPatch):
    walked: list[str] = []
    real = base._JSON_STRING.sub

    class Spy:
        def sub(self, repl: str, text: str) -> str:
            walked.append(text)
            return real(repl, text)

    monkeypatch.setattr(base, "_JSON_STRING", Spy())
    small = json.dumps({"gpus": [{"index": i, "serial": f"S{i}"} for i in range(8)], "x": [1, 2]})
    assert json_document(small)["x"] == [1, 2] and walked == []
    json_document(json.dumps({"gpus": [{"index": i} for i in range(MAX_JSON_DEPTH)]}))
    assert len(walked) == 1  # more brackets than the limit: walked
