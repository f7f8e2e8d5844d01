"""One Redfish session over one kept-alive HTTP(S) connection to a BMC.

A BMC under test is a small computer: a new TLS handshake and a Basic-auth check for every GET
(six per read of a 2-PSU chassis, ~15 a second for a 6-PSU node) is needless load on it. The
client opens one connection and reuses it; it logs in once through the SessionService
(POST .../Sessions -> X-Auth-Token) and logs out on close(). A BMC without a SessionService
gets Basic auth on the same connection. Only paths on this BMC are requested and redirects are
refused, so the credentials never travel to another host; no error message carries them.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from dataclasses import dataclass
from typing import Any, Optional

from harness.errors import ToolError, ToolTimeout
from harness.parsers.base import json_document

MAX_BODY = 8 << 20
SESSIONS = "/redfish/v1/SessionService/Sessions"
# A BMC that answers these to the login has no usable SessionService: Basic auth it is.
NO_SESSIONS = frozenset({400, 404, 405, 501})
_DROPPED = (http.client.RemoteDisconnected, http.client.CannotSendRequest, BrokenPipeError,
            ConnectionResetError, ConnectionAbortedError)


@dataclass(frozen=True)
class Response:
    """Status, headers (lower-case names) and body of one request."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


class RedfishClient:
    """GET JSON resources of one BMC through one session and one connection."""

    def __init__(self, scheme: str, host: str, port: Optional[int], user: str, password: str,
                 *, timeout_s: float, context: Optional[ssl.SSLContext] = None) -> None:
        self.base = f"{scheme}://{host}" + (f":{port}" if port else "")
        self._scheme, self._host, self._port = scheme, host, port
        self._timeout = timeout_s
        self._context = context
        self._user, self._password = user, password
        self._conn: Optional[http.client.HTTPConnection] = None
        self._auth: Optional[dict[str, str]] = None  # the header that authenticates each request
        self._session: Optional[str] = None  # the session's path, for the logout
        self.connections = 0  # connections opened, for the tests and the notes
        self.notes: list[str] = []

    def get(self, path: str, *, missing_ok: bool = False) -> Optional[dict[str, Any]]:
        """GET one resource as a JSON object; None for a 404 when `missing_ok`; ToolError otherwise."""
        if not path.startswith("/"):  # never send the credentials to another host
            raise ToolError(f"redfish {self.base}: refusing to follow {path[:120]!r} (not a path)")
        url = self.base + path
        if self._auth is None:
            self._login()
        resp = self._request("GET", path)
        if resp.status == 401 and self._session is not None:  # the session expired: log in again, once
            self._session = self._auth = None
            self._login()
            resp = self._request("GET", path)
        if resp.status == 404 and missing_ok:
            self.notes.append(f"redfish GET {url}: HTTP 404, skipped")
            return None
        _raise_for(resp, "GET", url)
        try:
            doc = json_document(resp.body.decode("utf-8"))
        except ValueError as e:
            raise ToolError(f"redfish GET {url}: not JSON ({e})") from None
        if not isinstance(doc, dict):
            raise ToolError(f"redfish GET {url}: not a JSON object")
        return doc

    def close(self) -> None:
        """Log out (best effort) and close the connection."""
        if self._session is not None and self._auth is not None:
            try:
                self._request("DELETE", self._session)
            except ToolError:
                pass
        self._session = self._auth = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _login(self) -> None:
        body = json.dumps({"UserName": self._user, "Password": self._password}).encode()
        resp = self._request("POST", SESSIONS, body, {"Content-Type": "application/json"})
        token = resp.headers.get("x-auth-token")
        if resp.status in (200, 201) and token:
            self._auth = {"X-Auth-Token": token}
            location = resp.headers.get("location", "")
            path = location.split("://", 1)[-1].partition("/")[2] if "://" in location else location
            self._session = ("/" + path.lstrip("/")) if path else None
            return
        if resp.status in NO_SESSIONS or (resp.status in (200, 201) and not token):
            token64 = base64.b64encode(f"{self._user}:{self._password}".encode()).decode("ascii")
            self._auth = {"Authorization": f"Basic {token64}"}
            self.notes.append(f"redfish {self.base}: no session service (HTTP {resp.status}); "
                              "Basic auth on one kept-alive connection")
            return
        _raise_for(resp, "POST", self.base + SESSIONS)
        raise ToolError(f"redfish POST {self.base + SESSIONS}: HTTP {resp.status} {resp.reason}")

    def _request(self, method: str, path: str, body: Optional[bytes] = None,
                 headers: Optional[dict[str, str]] = None) -> Response:
        """One request on the kept-alive connection, reconnecting once if the BMC dropped it."""
        sent = {"Accept": "application/json", "OData-Version": "4.0", **(self._auth or {}), **(headers or {})}
        url = self.base + path
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers=sent)
                raw = conn.getresponse()
                data = raw.read(MAX_BODY + 1)
                if len(data) > MAX_BODY:
                    self._drop()
                    raise ToolError(f"redfish {method} {url}: response larger than {MAX_BODY} bytes")
                if raw.will_close:
                    self._drop()
                return Response(raw.status, raw.reason, {k.lower(): v for k, v in raw.getheaders()}, data)
            except _DROPPED as e:
                self._drop()
                if attempt == 2:
                    raise ToolError(f"redfish {method} {url}: connection dropped ({e})") from None
            except TimeoutError:
                self._drop()
                raise ToolTimeout(f"redfish {method} {url}: timed out after {self._timeout:g} s") from None
            except ssl.SSLError as e:
                self._drop()
                raise ToolError(f"redfish {method} {url}: {e} (the BMC's certificate did not verify: "
                                "set bmc.ca_file, or bmc.verify_tls: false)") from None
            except OSError as e:
                self._drop()
                raise ToolError(f"redfish {method} {url}: {e}") from None
        raise AssertionError("unreachable")

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._scheme == "https":
                self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                                         context=self._context)
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            self.connections += 1
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _raise_for(resp: Response, method: str, url: str) -> None:
    """A one-line ToolError for a response that is not a success (never with the credentials)."""
    if 200 <= resp.status < 300:
        return
    if 300 <= resp.status < 400:
        where = resp.headers.get("location", "?")
        raise ToolError(f"redfish {method} {url}: HTTP {resp.status} redirect to {where} refused")
    hint = " (check the BMC user and password)" if resp.status in (401, 403) else ""
    raise ToolError(f"redfish {method} {url}: HTTP {resp.status} {resp.reason}{hint}")
