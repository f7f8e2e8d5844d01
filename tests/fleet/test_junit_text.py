"""The fleet's own writer of a node's <testsuite> gives ElementTree's very text (indent + tostring)."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.fleet.junit import INDENT, indented

# text as results carry it: markup, quotes, entities, line breaks and tabs, blanks
texts = st.one_of(st.none(), st.sampled_from(["", " ", "\n  ", "\t"]),
                  st.text(alphabet=st.sampled_from('ab &<>"\'\r\n\t;é—'), max_size=12))
tags = st.sampled_from(["testsuite", "testcase", "failure", "system-out", "property", "properties"])


@st.composite
def trees(draw: st.DrawFn, depth: int = 0) -> ET.Element:
    el = ET.Element(draw(tags), {k: draw(texts) or "" for k in draw(st.lists(
        st.sampled_from(["name", "classname", "message", "time", "value", "id"]), max_size=4, unique=True))})
    el.text = draw(texts)
    if depth < 3:
        for _ in range(draw(st.integers(0, 3))):
            child = draw(trees(depth + 1))
            child.tail = draw(texts)
            el.append(child)
    return el


@settings(max_examples=400, deadline=None)
@given(trees(), st.integers(0, 3))
def test_indented_is_elementtrees_text(tree: ET.Element, level: int):
    tree.tail = None
    before = ET.tostring(tree, encoding="unicode")
    mine = indented(tree, level)
    assert ET.tostring(tree, encoding="unicode") == before  # the tree is left as it was
    theirs = copy.deepcopy(tree)
    ET.indent(theirs, space=INDENT, level=level)
    assert mine == ET.tostring(theirs, encoding="unicode")
