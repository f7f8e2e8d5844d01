"""`harness parse` reads regular files only, up to PARSE_LIMIT: /dev/zero, a FIFO with no writer, a
directory, a huge file and a symlink to a device are each one error line and exit 2, promptly."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from clihelp import harness

from harness.cli.parse import PARSE_LIMIT


def _refused(path: Path | str, why: str) -> None:
    t0 = time.monotonic()
    r = harness("parse", "fio", str(path), timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert time.monotonic() - t0 < 30  # no read until memory runs out, no wait on a FIFO
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"{path}:1:1: {why}"


def test_dev_zero_is_refused():
    _refused("/dev/zero", "is a device, not a regular file: give a file of saved tool output")


def test_a_fifo_with_no_writer_does_not_block(tmp_path: Path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    _refused(fifo, "is a FIFO, not a regular file: give a file of saved tool output")


def test_a_symlink_to_a_device_is_refused(tmp_path: Path):
    link = tmp_path / "fio.json"
    link.symlink_to("/dev/urandom")
    _refused(link, "is a device, not a regular file: give a file of saved tool output")


def test_a_file_over_the_limit_is_refused_unread(tmp_path: Path):
    big = tmp_path / "fio.json"
    with open(big, "wb") as f:
        f.truncate(PARSE_LIMIT + 1)  # sparse: nothing to write, nothing read
    _refused(big, "larger than 64 MiB: not saved tool output (harness parse reads at most that)")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_refused(tmp_path: Path):
    f = tmp_path / "fio.json"
    f.write_text("{}")
    f.chmod(0)
    _refused(f, "cannot read: Permission denied")


def test_a_file_at_the_limit_is_still_read(tmp_path: Path):
    ok = tmp_path / "fio.json"
    ok.write_text('{"fio version": "fio-3.33", "jobs": []}')
    r = harness("parse", "fio", str(ok))
    # read and parsed (not refused): a fio JSON with no job is an invalid output, exit 2 with the JSON
    assert r.returncode == 2 and '"metrics"' in r.stdout, r.stderr
    assert r.stderr.strip() == f"error: {ok}: not a valid fio output: fio JSON output has no jobs"


def test_an_invalid_parse_exits_2_and_a_valid_one_0():
    r = harness("parse", "fio", "/etc/hostname")
    assert r.returncode == 2, r.stdout
    assert json.loads(r.stdout)["valid"] is False
    assert r.stderr.startswith("error: /etc/hostname: not a valid fio output: not fio JSON output")
    sample = Path(__file__).resolve().parents[1] / "data/fio/fio3.28_json_randrw_gtod_reduce_k8s.json"
    good = harness("parse", "fio", str(sample))
    assert good.returncode == 0 and json.loads(good.stdout)["valid"] is True, good.stderr
