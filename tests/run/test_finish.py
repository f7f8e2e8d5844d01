"""The end of a run: outputs written once, after history; failures outside the checks exit 3 with
every output saying ERRORED; a signal at the boundary never makes outputs and exit code disagree."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import results
from harness.cli.quiet import run_quietly
from harness.history import record as history
from harness.report.outputs import HTML_NAME, JUNIT_NAME, RENDERERS
from harness.run import finish, progress, retention
from harness.run import session as app

JUDGED = "[{metric: command.duration, max: 3600, unit: s}]"  # a rule, so a check passes (not recorded)
TWO = ("name: two\nchecks:\n"
       f"  - {{id: first, kind: command, params: {{argv: [/bin/true]}}, expect: {JUDGED}}}\n"
       f"  - {{id: last, kind: command, params: {{argv: [/bin/true]}}, expect: {JUDGED}}}\n")


def node() -> dict[str, Any]:
    return {"host": {"hostname": "node"}}


def go(tmp_path: Path, suite: str = TWO, **kw: Any) -> app.Finished:
    (tmp_path / "s.yaml").write_text(suite)
    kw.setdefault("history", tmp_path / "history.sqlite")
    return app.execute(suite=str(tmp_path / "s.yaml"), profile="generic", output=tmp_path / "reports",
                       argv=("harness",), inventory_probe=node, **kw)


def doc(done: app.Finished) -> dict[str, Any]:
    assert done.run_dir is not None
    data: dict[str, Any] = json.loads((done.run_dir / "results.json").read_text())
    return data


def counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, calls: list[Any]) -> None:
    real = getattr(owner, name)

    def wrapper(*args: Any, **kw: Any) -> Any:
        calls.append((args, kw))
        return real(*args, **kw)

    monkeypatch.setattr(owner, name, wrapper)


def test_final_outputs_are_rendered_and_written_once_after_history(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch):
    writes: list[Any] = []
    reports: list[Any] = []
    annotated: list[Any] = []
    counting(monkeypatch, results, "write", writes)
    counting(monkeypatch, finish, "write_rendered", reports)
    counting(monkeypatch, history.RunHistory, "annotate", annotated)
    done = go(tmp_path)
    assert done.code == 0 and done.record is not None and done.record.verdict == "ACCEPTED"
    final = [kw for _, kw in writes if kw.get("durable", True)]
    assert len(final) == 1 and len(writes) == 4  # 3 snapshots while running (start, each check), 1 final
    assert len(reports) == 1 and len(annotated) == 1
    (_, texts), _kw = reports[0]
    assert set(texts) == {HTML_NAME, JUNIT_NAME}
    assert done.run_dir is not None
    assert doc(done)["history"]["store"] == str(tmp_path / "history.sqlite")  # history is in what was written
    assert (done.run_dir / HTML_NAME).read_text() == texts[HTML_NAME]
    assert json.loads(json.dumps(done.record.to_dict())) == doc(done)  # returned = written


def test_history_off_is_a_parameter_not_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         state_dir: Path):
    monkeypatch.setenv("HARNESS_HISTORY", str(tmp_path / "from-env.sqlite"))  # only the CLI reads it
    done = go(tmp_path, history="off")
    assert done.code == 0 and doc(done)["history"] == {}
    assert not (tmp_path / "from-env.sqlite").exists()
    assert not (tmp_path / "reports" / "history.sqlite").exists()
    (tmp_path / "b").mkdir()
    done = go(tmp_path / "b", history=None)  # default: the node's store, wherever --output is
    assert doc(done)["history"]["store"] == str(state_dir / "history.sqlite")
    assert not (tmp_path / "b" / "reports" / "history.sqlite").exists()


def boom(*_: Any) -> Any:
    raise RuntimeError("renderer exploded")


def test_a_report_that_cannot_render_errors_the_run_and_the_rest_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setitem(RENDERERS, HTML_NAME, boom)  # type: ignore[index]
    done = go(tmp_path)
    assert done.code == 3 and done.run_dir is not None
    d = doc(done)
    assert d["verdict"] == "ERRORED"
    entry = d["checks"][-1]
    assert (entry["id"], entry["kind"], entry["status"]) == ("harness", "harness", "errored")
    assert entry["message"] == ("internal error while rendering report.html: RuntimeError: renderer exploded "
                                "(traceback in harness.log)")
    assert [c["status"] for c in d["checks"][:2]] == ["passed", "passed"]  # the checks' own results stand
    assert not (done.run_dir / HTML_NAME).exists()
    assert "renderer exploded" in (done.run_dir / JUNIT_NAME).read_text()  # junit shows the error too
    assert "Traceback" in (done.run_dir / "harness.log").read_text()
    err = capsys.readouterr().err.splitlines()
    assert [ln for ln in err if ln.startswith("error:")] == [
        f"error: internal error while rendering report.html: RuntimeError: renderer exploded "
        f"(traceback in {done.run_dir / 'harness.log'})"]


def test_a_history_bug_errors_the_run_and_the_report_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(history, "annotate", boom)
    done = go(tmp_path)
    assert done.code == 3 and done.record is not None and done.record.verdict == "ERRORED"
    assert done.run_dir is not None
    html = (done.run_dir / HTML_NAME).read_text()
    assert "internal error while reading history: RuntimeError" in html and "ERRORED" in html
    assert doc(done)["verdict"] == "ERRORED"


def test_a_bug_in_the_session_between_checks_keeps_what_finished(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    real = progress.PlainProgress.check_finished

    def once(self: progress.PlainProgress, result: Any) -> None:
        real(self, result)
        raise KeyError("progress bug")

    monkeypatch.setattr(progress.PlainProgress, "check_finished", once)
    done = go(tmp_path)
    assert done.code == 3
    status = {c["id"]: c["status"] for c in doc(done)["checks"]}
    assert status == {"first": "passed", "last": "not_run", "harness": "errored"}
    assert doc(done)["verdict"] == "ERRORED" and doc(done)["interrupted"] is False
    assert done.run_dir is not None and (done.run_dir / HTML_NAME).is_file()


def kill_self_before(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, sig: int) -> None:
    real: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kw: Any) -> Any:
        os.kill(os.getpid(), sig)
        return real(*args, **kw)

    monkeypatch.setattr(owner, name, wrapper)


@pytest.mark.parametrize("where", ["annotate", "render", "prune"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_the_last_check_leaves_verdict_and_exit_code_agreeing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, sig: int):
    owner = {"annotate": history.RunHistory, "render": finish, "prune": retention}[where]
    kill_self_before(monkeypatch, owner, where, sig)
    out: list[str] = []

    class Line:
        def write(self, s: str) -> None:
            out.append(s)

        def flush(self) -> None:
            pass

    code = run_quietly(lambda: go(tmp_path, quiet=True), out=Line())  # type: ignore[arg-type]
    assert code == 0
    assert "".join(out).startswith("harness: ACCEPTED: 2 passed |")
    (run_dir,) = [p for p in (tmp_path / "reports").iterdir() if p.is_dir() and p.name[0] != "."]
    d = json.loads((run_dir / "results.json").read_text())
    assert d["verdict"] == "ACCEPTED" and d["interrupted"] is False
    junit = (run_dir / JUNIT_NAME).read_text()
    assert 'failures="0"' in junit and 'errors="0"' in junit and 'tests="2"' in junit
    if where != "prune":
        assert "arrived after the last check had finished: the verdict stands" in \
            (run_dir / "harness.log").read_text()


def test_a_signal_during_the_last_check_makes_every_output_say_incomplete(tmp_path: Path):
    suite = ("name: two\nchecks:\n"
             f"  - {{id: first, kind: command, params: {{argv: [/bin/true]}}, expect: {JUDGED}}}\n"
             f"  - {{id: last, kind: command, params: {{argv: [sleep, '30']}}, expect: {JUDGED}}}\n")
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    out: list[str] = []

    class Line:
        def write(self, s: str) -> None:
            out.append(s)

        def flush(self) -> None:
            pass

    try:
        code = run_quietly(lambda: go(tmp_path, suite=suite, quiet=True), out=Line())  # type: ignore[arg-type]
    finally:
        timer.cancel()
    assert code == 143
    assert "".join(out).startswith("harness: INCOMPLETE: 1 passed, 1 not run | interrupted |")
    (run_dir,) = [p for p in (tmp_path / "reports").iterdir() if p.is_dir() and p.name[0] != "."]
    d = json.loads((run_dir / "results.json").read_text())
    assert d["verdict"] == "INCOMPLETE" and d["interrupted"] is True
    assert "INCOMPLETE" in (run_dir / HTML_NAME).read_text()


def test_the_light_names_of_the_reports_are_the_renderers_own():
    """finish writes and clears the reports by files.NAMES without loading the renderers: the
    same names, in the same order, as outputs.RENDERERS renders."""
    from harness.report import files

    assert tuple(RENDERERS) == files.NAMES == (HTML_NAME, JUNIT_NAME)


def test_a_run_renders_through_its_helper_and_closes_it(tmp_path: Path):
    """The session reads the inventory from its helper (run.helper), has it prepare and render the
    reports, releases it as soon as the last render is back (it ends while the run writes), and
    closes it; a stand-in here records the calls (test_helper forks a real one)."""
    seen: list[str] = []

    class StandIn(finish.InProcess):
        def inventory(self, read_here: Any) -> dict[str, Any]:
            seen.append("inventory")
            return node()

        def prepare(self, output: Path) -> None:
            seen.append(f"prepare {output.name}")
            super().prepare(output)

        def render(self, record: Any, run_dir: Path) -> Any:
            seen.append("render")
            return super().render(record, run_dir)

        def release(self) -> None:
            seen.append("release")

        def close(self) -> None:
            seen.append("close")

    (tmp_path / "s.yaml").write_text(TWO)
    done = app.execute(suite=str(tmp_path / "s.yaml"), profile="generic", output=tmp_path / "reports",
                       argv=("harness",), history="off", helper=StandIn())  # type: ignore[arg-type]
    assert done.code == 0 and seen == ["inventory", "prepare reports", "render", "release", "close"]
    assert done.run_dir is not None and (done.run_dir / HTML_NAME).is_file()
