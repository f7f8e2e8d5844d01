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
def pushgateway(workdir: Path) -> Iterator[str]:
    """Start a Pushgateway on a free loopback port; yield its URL; stop it (only the process we started)."""
    exe = need(BINARY, "prometheus-pushgateway")
    port = free_port()
    log = open(workdir / "pushgateway.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([exe, f"--web.listen-address=127.0.0.1:{port}",
                             f"--persistence.file={workdir / 'pushgateway.data'}"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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
                raise RuntimeError(f"pushgateway did not start: {(workdir / 'pushgateway.log').read_text()}")
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()


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
