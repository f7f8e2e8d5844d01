"""The one sysfs/procfs reader: unreadable is None, never an exception."""

from __future__ import annotations

from pathlib import Path

from harness.platform.sysfs import read, read_value


def test_read_keeps_the_text_and_read_value_strips_it(tmp_path: Path) -> None:
    f = tmp_path / "mtu"
    f.write_text("  9000\n")
    assert read(f) == "  9000\n" and read_value(f) == "9000" and read_value(str(f)) == "9000"


def test_what_cannot_be_read_is_none(tmp_path: Path) -> None:
    assert read(tmp_path / "absent") is None and read_value(tmp_path / "absent") is None
    assert read(tmp_path) is None  # a directory: IsADirectoryError is an OSError
    locked = tmp_path / "locked"
    locked.write_text("secret")
    locked.chmod(0)
    try:
        assert read(locked) is None or read(locked) == "secret"  # root reads anything
    finally:
        locked.chmod(0o600)


def test_undecodable_bytes_do_not_raise(tmp_path: Path) -> None:
    f = tmp_path / "model"
    f.write_bytes(b"SAMSUNG \xff\xfe MZ\n")
    assert read_value(f) == "SAMSUNG \ufffd\ufffd MZ"
