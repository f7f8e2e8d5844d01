"""A Pushgateway URL with `user:pass@` in it: the password goes as HTTP basic authentication and is
never echoed, neither in an error nor in the line saying where the metrics went."""

from __future__ import annotations

from pathlib import Path

from clihelp import harness
from promhelp import free_port, pushgateway, scrape
from report_samples import record

from harness import results


def _run(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    results.write(d, record())
    return d


def test_a_refused_push_names_the_gateway_without_its_password(tmp_path: Path) -> None:
    url = f"http://ops:s3cr%21t@127.0.0.1:{free_port()}"  # nothing listens there
    r = harness("fleet", "export", str(_run(tmp_path)), "--pushgateway", url)
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"push to http://ops:***@127.0.0.1:{url.rsplit(':', 1)[1]} (node=" in r.stderr
    assert "s3cr" not in r.stdout + r.stderr


def test_a_push_with_credentials_reaches_the_gateway_and_prints_none(tmp_path: Path) -> None:
    with pushgateway(tmp_path) as plain:
        url = plain.replace("http://", "http://ops:s3cret@")
        r = harness("fleet", "export", str(_run(tmp_path)), "--pushgateway", url)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "pushed node gpu-node-017 to http://ops:***@127.0.0.1:" in r.stdout
        assert "s3cret" not in r.stdout + r.stderr
        assert any(dict(k[1]).get("node") == "gpu-node-017" for k in scrape(plain))
