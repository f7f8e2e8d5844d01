"""RedfishSource against a real local HTTPS server serving the real Redfish resources.

The server is http.server over TLS (a self-signed certificate made with openssl) in a thread; it
checks Basic auth on every request. The resources it serves are the files in tests/data/redfish;
the Chassis collection, Chassis and PowerSupplies collection resources that link them are
synthetic (written here, marked SYNTHETIC), because the fixtures hold only the power resources.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.config.bmc import BmcConfig
from harness.errors import ToolError, ToolTimeout
from harness.parsers.registry import parsers
from harness.platform.bmc import RedfishSource, open_source

DATA = Path(__file__).parents[1] / "data" / "redfish"
USER, PASSWORD = "operator", "s3cret-Redfish-pw"
ENV = {"REDFISH_USER": USER, "REDFISH_PASSWORD": PASSWORD}
DMTF = ["dmtf-rackmount1-Chassis-1U-PowerSubsystem.json",
        "dmtf-rackmount1-Chassis-1U-PowerSubsystem-PowerSupplies-Bay1.json",
        "dmtf-rackmount1-Chassis-1U-PowerSubsystem-PowerSupplies-Bay1-Metrics.json",
        "dmtf-rackmount1-Chassis-1U-PowerSubsystem-PowerSupplies-Bay2-absent.json",
        "dmtf-rackmount1-Chassis-1U-EnvironmentMetrics.json",
        "dmtf-rackmount1-Chassis-1U-Power.json"]


def _real(*names: str) -> dict[str, Any]:
    docs = {}
    for name in names:
        doc = json.loads((DATA / name).read_text())
        docs[doc["@odata.id"]] = doc
    return docs


def _chassis(cid: str, *links: str) -> dict[str, Any]:
    """SYNTHETIC Chassis resource linking the power resources that exist for it."""
    base = f"/redfish/v1/Chassis/{cid}"
    return {"@odata.id": base, "Id": cid, **{k: {"@odata.id": f"{base}/{k}"} for k in links}}


def _members(oid: str, *members: str) -> dict[str, Any]:
    """SYNTHETIC collection resource."""
    return {"@odata.id": oid, "Members": [{"@odata.id": m} for m in members]}


def dmtf_tree() -> dict[str, Any]:
    sub = "/redfish/v1/Chassis/1U/PowerSubsystem/PowerSupplies"
    return {**_real(*DMTF),
            "/redfish/v1/Chassis": _members("/redfish/v1/Chassis", "/redfish/v1/Chassis/1U"),
            "/redfish/v1/Chassis/1U": _chassis("1U", "PowerSubsystem", "Power", "EnvironmentMetrics"),
            sub: _members(sub, f"{sub}/Bay1", f"{sub}/Bay2")}


@dataclass
class FakeBmc:
    """A Redfish service: real HTTPS with keep-alive, a SessionService and Basic auth, the tree as JSON."""

    tree: dict[str, Any]
    seen: list[tuple[str, bool]] = field(default_factory=list)  # (path, authorised)
    redirects: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    port: int = 0
    sessions: bool = True  # False: no SessionService (POST answers 405), Basic auth only
    expire_after: int | None = None  # a session token stops working after this many GETs
    drop_after: int | None = None  # close the connection silently after this many GETs (a restart)
    connections: int = 0
    logins: int = 0
    logouts: list[str] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)  # token -> GETs served with it


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real BMC's web server
    bmc: FakeBmc

    def setup(self) -> None:
        super().setup()
        self.server.bmc.connections += 1  # type: ignore[attr-defined]

    def _authorised(self, bmc: FakeBmc) -> bool:
        token = self.headers.get("X-Auth-Token")
        if token is not None:
            if token not in bmc.tokens:
                return False
            bmc.tokens[token] += 1
            return bmc.expire_after is None or bmc.tokens[token] <= bmc.expire_after
        basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        return self.headers.get("Authorization") == f"Basic {basic}"

    def do_POST(self) -> None:
        bmc = self.server.bmc  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if not bmc.sessions or self.path != "/redfish/v1/SessionService/Sessions":
            return self._send(405, {"error": "method not allowed"})
        if body.get("UserName") != USER or body.get("Password") != PASSWORD:
            return self._send(401, {"error": "unauthorised"})
        bmc.logins += 1
        token = f"tok{bmc.logins}"
        bmc.tokens[token] = 0
        return self._send(201, {"Id": str(bmc.logins)},
                          {"X-Auth-Token": token,
                           "Location": f"/redfish/v1/SessionService/Sessions/{bmc.logins}"})

    def do_DELETE(self) -> None:
        bmc = self.server.bmc  # type: ignore[attr-defined]
        if not self._authorised(bmc):
            return self._send(401, {"error": "unauthorised"})
        bmc.logouts.append(self.path)
        return self._send(204, None)

    def do_GET(self) -> None:
        bmc = self.server.bmc  # type: ignore[attr-defined]
        ok = self._authorised(bmc)
        path = self.path.rstrip("/") or "/"
        bmc.seen.append((path, ok))
        if bmc.delay_s:
            time.sleep(bmc.delay_s)
        if not ok:
            return self._send(401, {"error": "unauthorised"}, {"WWW-Authenticate": 'Basic realm="bmc"'})
        if path in bmc.redirects:
            return self._send(302, {}, {"Location": bmc.redirects[path]})
        if path not in bmc.tree:
            return self._send(404, {"error": "not found"})
        self._send(200, bmc.tree[path])
        if bmc.drop_after is not None and len(bmc.seen) == bmc.drop_after:
            self.close_connection = True  # no "Connection: close": the client learns on its next request

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that refuses our certificate (a test of that) is no server error


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed (apt-get install openssl)")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(d / "key.pem"), "-out", str(d / "cert.pem"), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-days", "2"],
                   check=True, capture_output=True, timeout=120)
    return d / "cert.pem", d / "key.pem"


@pytest.fixture
def serve(cert: tuple[Path, Path]) -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(bmc: FakeBmc) -> FakeBmc:
        server = _Server(("127.0.0.1", 0), _Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        server.bmc = bmc  # type: ignore[attr-defined]
        bmc.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return bmc

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _config(bmc: FakeBmc, **kw: Any) -> BmcConfig:
    return BmcConfig(**{"kind": "redfish", "host": "127.0.0.1", "port": bmc.port,
                        "verify_tls": False, "timeout_s": 10.0, **kw})


def test_power_subsystem_read_over_https(serve: Any) -> None:
    bmc = serve(FakeBmc(dmtf_tree()))
    source = open_source(_config(bmc), environ=ENV)
    assert isinstance(source, RedfishSource)
    reading = source.read()
    assert reading.node_power_w == 374 and reading.redundant is False
    assert [(p.name, p.ok, p.power_in_w, p.capacity_w) for p in reading.psus] == [
        ("PSU1", False, 937.4, 400), ("PSU2", False, None, None)]
    assert reading.source == (f"redfish https://127.0.0.1:{bmc.port}/redfish/v1/Chassis/1U"
                              " (node power: EnvironmentMetrics)")
    paths = [p for p, _ in bmc.seen]
    assert "/redfish/v1/Chassis/1U/Power" not in paths  # PowerSubsystem preferred, node power found
    assert all(ok for _, ok in bmc.seen)  # Basic auth on every request
    assert sorted(source.last_documents) == sorted(p for p in _real(*DMTF[:5]))
    again = parsers()["redfish-power"](source.last_raw["redfish-power"])  # the kept evidence
    assert again.valid and ("bmc.power", 374.0) in [(m.name, m.value) for m in again.metrics]
    # a second read goes straight to the resources, without discovery
    bmc.seen.clear()
    assert source.read().node_power_w == 374
    assert "/redfish/v1/Chassis" not in [p for p, _ in bmc.seen]
    for text in (repr(reading), source.describe(), " ".join(source.notes), source.last_raw["redfish-power"]):
        assert PASSWORD not in text and base64.b64encode(PASSWORD.encode()).decode() not in text


def test_verify_tls_with_the_bmc_certificate(serve: Any, cert: tuple[Path, Path]) -> None:
    bmc = serve(FakeBmc(dmtf_tree()))
    reading = RedfishSource(_config(bmc, verify_tls=True, ca_file=str(cert[0])), ENV).read()
    assert reading.node_power_w == 374
    with pytest.raises(ToolError, match=r"did not verify: set bmc\.ca_file, or bmc\.verify_tls: false"):
        RedfishSource(_config(bmc, verify_tls=True), ENV).read()


def test_legacy_power_when_no_power_subsystem(serve: Any) -> None:
    tree = {**_real("telegraf-hpe-ilo5-Chassis-1-Power.json"),
            "/redfish/v1/Chassis": _members("/redfish/v1/Chassis", "/redfish/v1/Chassis/1"),
            "/redfish/v1/Chassis/1": _chassis("1", "Power")}
    bmc = serve(FakeBmc(tree))
    reading = RedfishSource(_config(bmc), ENV).read()
    assert reading.node_power_w == 221 and reading.redundant is True
    assert [(p.name, p.ok, p.power_out_w) for p in reading.psus] == [("PSU1", True, 0), ("PSU2", True, 90)]


def test_subsystem_without_node_power_adds_legacy_power_control(serve: Any) -> None:
    # PSUs from the PowerSubsystem, node power from the legacy Power resource's PowerControl
    # (both are iDRAC 9 captures of the same chassis path, from two different machines)
    dell = "/redfish/v1/Chassis/System.Embedded.1"
    tree = {**_real("libredfish-dell-idrac9-Chassis-System.Embedded.1-PowerSubsystem.json",
                    "libredfish-dell-idrac9-PowerSubsystem-PowerSupplies-PSU.Slot.1.json",
                    "libredfish-dell-idrac9-PowerSubsystem-PowerSupplies-PSU.Slot.1-Metrics.json",
                    "telegraf-dell-idrac9-Chassis-System.Embedded.1-Power.json"),
            "/redfish/v1/Chassis": _members("/redfish/v1/Chassis", dell),
            dell: _chassis("System.Embedded.1", "PowerSubsystem", "Power"),
            f"{dell}/PowerSubsystem/PowerSupplies": _members(
                f"{dell}/PowerSubsystem/PowerSupplies", f"{dell}/PowerSubsystem/PowerSupplies/PSU.Slot.1")}
    reading = RedfishSource(_config(serve(FakeBmc(tree))), ENV).read()
    assert reading.node_power_w == 429 and "PowerControl" in reading.source
    assert [(p.name, p.ok, p.power_in_w, p.power_out_w, p.capacity_w) for p in reading.psus] == [
        ("PSU1", True, 303, 273, 2400)]


def test_chassis_choice(serve: Any) -> None:
    tree = {**dmtf_tree(),
            "/redfish/v1/Chassis": _members("/redfish/v1/Chassis", "/redfish/v1/Chassis/BMC",
                                            "/redfish/v1/Chassis/1U"),
            "/redfish/v1/Chassis/BMC": _chassis("BMC")}  # no power links: passed over
    bmc = serve(FakeBmc(tree))
    source = RedfishSource(_config(bmc), ENV)
    assert source.read().node_power_w == 374 and source.describe().endswith("/Chassis/1U")
    assert RedfishSource(_config(bmc, chassis="1U"), ENV).read().node_power_w == 374
    with pytest.raises(ToolError, match=r"no chassis 'HGX' \(found: BMC, 1U\)"):
        RedfishSource(_config(bmc, chassis="HGX"), ENV).read()
    with pytest.raises(ToolError, match="no chassis with Power or PowerSubsystem"):
        RedfishSource(_config(bmc, chassis="BMC"), ENV).read()


def test_wrong_password_is_a_one_line_error_without_the_password(serve: Any) -> None:
    bmc = serve(FakeBmc(dmtf_tree()))
    wrong = "not-the-" + PASSWORD
    with pytest.raises(ToolError) as err:
        RedfishSource(_config(bmc), {"REDFISH_USER": USER, "REDFISH_PASSWORD": wrong}).read()
    msg = str(err.value)
    assert msg == (f"redfish POST https://127.0.0.1:{bmc.port}/redfish/v1/SessionService/Sessions:"
                   " HTTP 401 Unauthorized (check the BMC user and password)")
    assert wrong not in msg and "\n" not in msg


def test_redirect_is_refused(serve: Any) -> None:
    bmc = serve(FakeBmc(dmtf_tree(), redirects={"/redfish/v1/Chassis": "https://203.0.113.9/steal"}))
    with pytest.raises(ToolError, match=r"redirect to https://203\.0\.113\.9/steal refused"):
        RedfishSource(_config(bmc), ENV).read()


def test_links_to_other_hosts_are_not_followed(serve: Any) -> None:
    tree = dmtf_tree()
    tree["/redfish/v1/Chassis"] = {"Members": [{"@odata.id": "https://203.0.113.9/redfish/v1/Chassis/1U"}]}
    bmc = serve(FakeBmc(tree))
    with pytest.raises(ToolError, match="refusing to follow"):
        RedfishSource(_config(bmc), ENV).read()


def test_json_nested_past_the_recursion_limit_is_a_tool_error(serve: Any) -> None:
    """A BMC (or what answers in its place) that sends 100,000 nested objects: one ToolError naming
    the URL, not a RecursionError out of the client (issue #26.11)."""
    tree = dmtf_tree()
    tree["/redfish/v1/Chassis"] = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    bmc = serve(FakeBmc(tree))
    with pytest.raises(ToolError, match=r"redfish GET https://127\.0\.0\.1:\d+/redfish/v1/Chassis: not JSON "
                                        r"\(JSON nested 100000 levels deep"):
        RedfishSource(_config(bmc), ENV).read()


def test_timeout(serve: Any) -> None:
    bmc = serve(FakeBmc(dmtf_tree(), delay_s=3.0))
    with pytest.raises(ToolTimeout, match=r"timed out after 0\.5 s"):
        RedfishSource(_config(bmc, timeout_s=0.5), ENV).read()


def test_credentials_from_named_variables_and_file(serve: Any, tmp_path: Path) -> None:
    bmc = serve(FakeBmc(dmtf_tree()))
    named = _config(bmc, user_env="BMC_USER", password_env="BMC_PW")
    assert RedfishSource(named, {"BMC_USER": USER, "BMC_PW": PASSWORD}).read().node_power_w == 374
    secret = tmp_path / "pw"
    secret.write_text(PASSWORD + "\n")
    from_file = _config(bmc, user=USER, password_file=str(secret))
    assert RedfishSource(from_file, {}).read().node_power_w == 374


@pytest.mark.parametrize("environ, message", [
    ({}, "redfish needs a user: set REDFISH_USER"),
    ({"REDFISH_USER": USER}, "redfish needs a password: set REDFISH_PASSWORD"),
])
def test_missing_credentials(environ: dict[str, str], message: str) -> None:
    config = BmcConfig(kind="redfish", host="bmc.example")
    with pytest.raises(ToolError, match=message):
        RedfishSource(config, environ)


def test_unreachable_bmc() -> None:
    config = BmcConfig(kind="redfish", host="127.0.0.1", port=1, timeout_s=5)
    login = r"redfish POST https://127.0.0.1:1/redfish/v1/SessionService/Sessions: .*refused"
    with pytest.raises(ToolError, match=login):
        RedfishSource(config, ENV).read()


def test_one_session_and_one_connection_for_many_reads(serve: Any) -> None:
    bmc = serve(FakeBmc(dmtf_tree()))
    source = RedfishSource(_config(bmc), ENV)
    readings = [source.read() for _ in range(5)]
    assert all(r.node_power_w == 374 for r in readings)
    gets = len(bmc.seen)
    assert gets >= 5 * 3  # several resources a read
    assert bmc.logins == 1 and bmc.connections == 1  # not a TLS handshake and a login per GET
    assert all(ok for _, ok in bmc.seen)
    source.close()
    assert bmc.logouts == ["/redfish/v1/SessionService/Sessions/1"]


def test_a_bmc_without_session_service_gets_basic_auth_on_one_connection(serve: Any) -> None:
    bmc = serve(FakeBmc(dmtf_tree(), sessions=False))
    source = RedfishSource(_config(bmc), ENV)
    assert source.read().node_power_w == 374
    assert source.read().node_power_w == 374
    assert bmc.logins == 0 and bmc.connections == 1
    assert any("no session service" in n for n in source.notes)
    source.close()
    assert bmc.logouts == []


def test_an_expired_session_logs_in_again_once(serve: Any) -> None:
    bmc = serve(FakeBmc(dmtf_tree(), expire_after=3))
    source = RedfishSource(_config(bmc), ENV)
    assert source.read().node_power_w == 374
    assert source.read().node_power_w == 374
    assert bmc.logins >= 2
    assert sum(1 for _, ok in bmc.seen if not ok) == bmc.logins - 1  # each expiry cost one refused GET
    assert source.client.connections == 1


def test_a_dropped_connection_is_reopened(serve: Any) -> None:
    bmc = serve(FakeBmc(dmtf_tree(), drop_after=2))
    source = RedfishSource(_config(bmc), ENV)
    assert source.read().node_power_w == 374
    assert source.read().node_power_w == 374
    assert source.client.connections == 2 and bmc.connections == 2 and bmc.logins == 1
