"""The `bmc:` config block: what it accepts, what it refuses, and that it cannot hold a secret."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from harness.config.bmc import BmcConfig


def test_defaults_read_the_local_bmc_in_band() -> None:
    c = BmcConfig()
    assert (c.kind, c.interface, c.host, c.sdr, c.dcmi, c.verify_tls, c.timeout_s) == (
        "auto", "open", None, "full", True, True, 20.0)


@pytest.mark.parametrize("fields", [
    {"kind": "ipmi", "interface": "lanplus", "host": "10.0.0.5", "user": "admin", "port": 623,
     "password_env": "NODE_BMC_PW", "privilege": "USER", "cipher_suite": 17},
    {"kind": "ipmi", "interface": "lan", "host": "bmc01.example", "password_file": "/etc/bmc.pw"},
    {"kind": "redfish", "host": "[2001:db8::5]", "port": 8443, "verify_tls": False, "chassis": "1"},
    {"kind": "redfish", "host": "bmc01", "ca_file": "/etc/bmc-ca.pem", "user_env": "BMC_USER"},
    {"kind": "none"},
])
def test_valid(fields: dict[str, Any]) -> None:
    c = BmcConfig(**fields)
    assert all(getattr(c, k) == v for k, v in fields.items())


@pytest.mark.parametrize("fields, message", [
    ({"kind": "ipmi", "interface": "lanplus"}, "interface lanplus needs a host"),
    ({"kind": "redfish"}, "redfish needs a host"),
    ({"kind": "ipmi", "host": "10.0.0.5"}, "host is set but interface is open"),
    ({"kind": "auto", "interface": "lanplus", "host": "10.0.0.5"}, "kind auto reads the local BMC"),
    ({"kind": "redfish", "host": "admin:pw@bmc01"}, "without user, password or path"),
    ({"kind": "redfish", "host": "bmc01/redfish"}, "without user, password or path"),
    ({"kind": "redfish", "host": "bmc01", "password_env": "X", "password_file": "/f"}, "not both"),
    ({"kind": "redfish", "host": "bmc01", "password_env": "BMC-PW"}, "not an environment variable name"),
    ({"kind": "redfish", "host": "bmc01", "password": "hunter2"}, "Extra inputs are not permitted"),
    ({"kind": "ipmi", "interface": "lanplus", "host": "h", "cipher_suite": 18}, "less than or equal to 17"),
    ({"timeout_s": 0}, "greater than 0"),
    ({"kind": "ilo"}, "Input should be"),
])
def test_invalid(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        BmcConfig(**fields)


def test_frozen() -> None:
    with pytest.raises(ValidationError):
        BmcConfig().host = "x"  # type: ignore[misc]
