"""A real Prometheus Pushgateway (Debian package prometheus-pushgateway) on 127.0.0.1 for tests.

Skipped when the binary is missing, except under CI=true where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

BINARY = "prometheus-pushgateway"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need(binary: str, package: str) -> str:
    path = shutil.which(binary)
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{binary} is missing (apt-get install {package}); CI=true requires it",
                        pytrace=False)
        pytest.skip(f"{binary} not installed (apt-get install {package})")
    return path


@contextmanager
def _serve(name: str, argv: list[str], workdir: Path, port: int, stop_s: float) -> Iterator[str]:
    """Start `argv` (listening on loopback `port`); yield its URL once /-/ready answers 200; stop it
    (only the process we started). Its output goes to WORKDIR/<name>.log."""
    log_path = workdir / f"{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start: {log_path.read_text()}")
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=stop_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()


@contextmanager
def pushgateway(workdir: Path) -> Iterator[str]:
    """Start a Pushgateway on a free loopback port; yield its URL; stop it (only the process we started)."""
    exe = need(BINARY, "prometheus-pushgateway")
    port = free_port()
    argv = [exe, f"--web.listen-address=127.0.0.1:{port}",
            f"--persistence.file={workdir / 'pushgateway.data'}"]
    with _serve("pushgateway", argv, workdir, port, 20) as url:
        yield url


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics and return {(sample name, sorted labels): value}."""

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return parse(text)


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@contextmanager
def prometheus(workdir: Path, target: str, rule_files: list[Path]) -> Iterator[str]:
    """Start Prometheus (Debian package prometheus) on a free loopback port, scraping `target`
    (host:port, honor_labels) every second and evaluating `rule_files` every second; yield its URL;
    stop it (only the process we started)."""
    exe = need("prometheus", "prometheus")
    port = free_port()
    cfg = workdir / "prometheus.yml"
    files = ", ".join(f'"{p}"' for p in rule_files)
    cfg.write_text(f"""\
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [{files}]
scrape_configs:
  - job_name: pushgateway
    honor_labels: true
    static_configs: [{{targets: ["{target}"]}}]
""")
    with _serve("prometheus", [exe, f"--config.file={cfg}", f"--storage.tsdb.path={workdir / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{port}"], workdir, port, 30) as url:
        yield url


def api(url: str, path: str, **params: str) -> Any:
    """GET Prometheus's HTTP API (/api/v1/<path>) and return its `data` (raises unless status is success)."""
    import json
    from urllib.parse import urlencode

    with urllib.request.urlopen(f"{url}/api/v1/{path}?{urlencode(params)}", timeout=10) as r:
        doc = json.loads(r.read().decode())
    if doc.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {doc}")
    return doc["data"]


def query(url: str, expr: str) -> list[dict[str, Any]]:
    """The instant vector `expr` evaluates to now (its `result` list)."""
    data = api(url, "query", query=expr)
    result: list[dict[str, Any]] = data["result"]
    if data["resultType"] == "scalar":
        return [{"metric": {}, "value": result}]
    return result
