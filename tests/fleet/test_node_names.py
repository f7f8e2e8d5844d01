"""Fleet node names are host names: a path as a node name writes nothing anywhere (issue #17.5)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clihelp import harness, write

from harness.errors import UsageError
from harness.fleet import dispatch

BAD = ["/etc/profile.d", "../../escaped/x", "x/y", "..", ".hidden", "-rf", "a..b", "n1 n2",
       "n\x00", "a" * 254, "n;rm", "$(id)"]


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match="is not a node name"):
        dispatch.check_node_name(name)


@pytest.mark.parametrize("name", ["n1", "gpu-001", "node_7", "n1.cluster.example", "7n", "a" * 253])
def test_host_names_pass(name: str) -> None:
    assert dispatch.check_node_name(name) == name


def test_expand_checks_every_expanded_name() -> None:
    assert dispatch.expand_nodes("gpu[001-002]") == ["gpu001", "gpu002"]
    with pytest.raises(UsageError, match=re.escape("'../x'")):
        dispatch.expand_nodes("gpu1,../x")


def test_submit_writes_nothing_when_one_name_is_bad(tmp_path: Path) -> None:
    opts = dispatch.JobOptions(suite_path=str(tmp_path / "s.yaml"))
    with pytest.raises(UsageError, match="/abs"):
        dispatch.submit(tmp_path / "fleet", "s", ["good1", "/abs"], opts)
    assert not (tmp_path / "fleet").exists()
    assert not (Path("/abs") / "job.sh").exists()


@pytest.mark.parametrize("nodes", ["{tmp}/target", "../../escaped/x"])
def test_cli_exits_2_before_writing(tmp_path: Path, nodes: str) -> None:
    suite = write(tmp_path / "s.yaml", "name: s\nchecks:\n  - id: inventory\n    kind: inventory\n")
    target = tmp_path / "target"
    target.mkdir()
    fleet = tmp_path / "a" / "b" / "fleet"
    r = harness("fleet", "run", str(suite), "--nodes", nodes.format(tmp=tmp_path),
                "--output", str(fleet), "--no-wait")
    assert r.returncode == 2, r.stderr
    assert "is not a node name" in r.stderr
    assert list(target.iterdir()) == []
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "a" / "escaped").exists()
    assert not fleet.exists()
