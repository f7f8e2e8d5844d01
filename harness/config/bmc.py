"""Where a check reads the BMC from: the `bmc:` block a suite may give a check.

Pure data, validated like every check's params (unknown keys are errors, values are frozen).
It never holds a secret: passwords come from an environment variable or a file named here,
and are read only when the source is opened (harness/platform/bmc.py).
"""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST = re.compile(r"^[A-Za-z0-9._:\[\]-]+$")  # a name, IPv4 or [IPv6]: no user@, no path


class BmcConfig(BaseModel):
    """How to reach the BMC.

    kind: `auto` (the local BMC in-band when /dev/ipmi* exists, else none), `ipmi`, `redfish`
    or `none`. ipmi: `interface` open (in-band, default) or lanplus/lan with `host`; password
    from `password_env` (default IPMI_PASSWORD) or `password_file` (ipmitool -f), never argv.
    redfish: https://`host`[:`port`], user from `user` or `user_env` (default REDFISH_USER),
    password from `password_env` (default REDFISH_PASSWORD) or `password_file`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["auto", "ipmi", "redfish", "none"] = "auto"
    interface: Literal["open", "lanplus", "lan"] = "open"
    host: Optional[str] = None
    port: Optional[int] = Field(None, ge=1, le=65535)
    user: Optional[str] = None
    user_env: Optional[str] = None
    password_env: Optional[str] = None
    password_file: Optional[str] = None
    privilege: Optional[Literal["CALLBACK", "USER", "OPERATOR", "ADMINISTRATOR"]] = None
    cipher_suite: Optional[int] = Field(None, ge=0, le=17)  # ipmitool -C (17 on newer BMCs)
    sdr: Literal["full", "power-supply"] = "full"  # `sdr elist`, or only `sdr type "Power Supply"`
    dcmi: bool = True  # ipmi: ask `dcmi power reading` for node power
    sdr_cache: bool = True  # ipmi: `sdr dump` once, then read sensors with -S (no SDR re-reads)
    scheme: Literal["https", "http"] = "https"
    verify_tls: bool = True
    ca_file: Optional[str] = None
    chassis: Optional[str] = None  # redfish Chassis member Id; default: the first with power data
    timeout_s: float = Field(20.0, gt=0, le=600)

    @model_validator(mode="after")
    def _consistent(self) -> BmcConfig:
        remote = self.kind == "redfish" or (self.kind == "ipmi" and self.interface != "open")
        if remote and not self.host:
            what = "redfish" if self.kind == "redfish" else f"interface {self.interface}"
            raise ValueError(f"bmc: {what} needs a host")
        if self.kind == "auto" and self.interface != "open":
            raise ValueError("bmc: kind auto reads the local BMC in-band; use kind: ipmi for"
                             f" interface {self.interface}")
        if self.kind in ("ipmi", "auto") and self.interface == "open" and self.host:
            raise ValueError("bmc: host is set but interface is open (in-band); "
                             "use interface: lanplus for a remote BMC")
        if self.host and not _HOST.match(self.host):
            raise ValueError("bmc: host must be a name or address, without user, password or path")
        if self.password_env and self.password_file:
            raise ValueError("bmc: give password_env or password_file, not both")
        for name in (self.user_env, self.password_env):
            if name is not None and not _ENV_NAME.match(name):
                raise ValueError(f"bmc: {name!r} is not an environment variable name")
        return self
