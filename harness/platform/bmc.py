"""The only module that talks to a BMC: ipmitool (in-band or over the LAN) and Redfish (HTTPS).

Both sources return a BmcReading (harness/model.py) built by the pure parsers, and keep
`notes` (what was learned about the BMC, e.g. "no DCMI", once each) and `last_raw` (name -> the
BMC's own output of the latest read: ipmitool's stdout, or the Redfish bundle that parse kind
`redfish-power` reads back). Secrets never reach argv, logs, results or raw-output names:
ipmitool gets its password through -E (the IPMI_PASSWORD / IPMITOOL_PASSWORD environment of the
child only) or -f FILE; Redfish logs in once per source (platform/redfish_client: one session,
one kept-alive connection), follows only paths on the BMC and refuses redirects.
"""

from __future__ import annotations

import json
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

from harness.errors import ToolError, ToolTimeout
from harness.model import BmcReading, BmcSource
from harness.parsers import ipmi, ipmi_sdr, redfish
from harness.platform import proc
from harness.platform.redfish_client import RedfishClient

LOCAL_DEVICES = ("/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0")


class BmcSettings(Protocol):
    """How to reach the BMC, as this module reads it; harness.config.bmc.BmcConfig (the validated
    `bmc:` settings) is one. A Protocol, so that the platform layer never imports config."""

    @property
    def kind(self) -> str: ...

    @property
    def interface(self) -> str: ...

    @property
    def host(self) -> Optional[str]: ...

    @property
    def port(self) -> Optional[int]: ...

    @property
    def user(self) -> Optional[str]: ...

    @property
    def user_env(self) -> Optional[str]: ...

    @property
    def password_env(self) -> Optional[str]: ...

    @property
    def password_file(self) -> Optional[str]: ...

    @property
    def privilege(self) -> Optional[str]: ...

    @property
    def cipher_suite(self) -> Optional[int]: ...

    @property
    def sdr(self) -> str: ...

    @property
    def dcmi(self) -> bool: ...

    @property
    def sdr_cache(self) -> bool: ...

    @property
    def scheme(self) -> str: ...

    @property
    def verify_tls(self) -> bool: ...

    @property
    def ca_file(self) -> Optional[str]: ...

    @property
    def chassis(self) -> Optional[str]: ...

    @property
    def timeout_s(self) -> float: ...


@dataclass(frozen=True)
class CmdOutput:
    """What one ipmitool call left: exit code and its output text."""

    rc: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool = False


# (argv, extra environment, timeout s, short name for raw files) -> output
Runner = Callable[[Sequence[str], Mapping[str, str], float, str], CmdOutput]


def default_runner(argv: Sequence[str], env: Mapping[str, str], timeout_s: float, name: str) -> CmdOutput:
    """Run through platform.proc (own process group, killed on timeout); output not kept."""
    with tempfile.TemporaryDirectory(prefix="harness-bmc-") as tmp:
        res = proc.run(argv, Path(tmp) / f"{name}.out", Path(tmp) / f"{name}.err", timeout_s,
                       env=dict(env) or None)
        return CmdOutput(res.rc, res.stdout(), res.stderr(), res.timed_out)


def tool_runner(run_tool: Callable[..., proc.ProcResult]) -> Runner:
    """A Runner over a check's `ctx.run_tool`, so each call is recorded and its output kept."""
    def run(argv: Sequence[str], env: Mapping[str, str], timeout_s: float, name: str) -> CmdOutput:
        res = run_tool(argv, name=name, timeout_s=timeout_s, env=dict(env) or None, check_rc=False)
        return CmdOutput(res.rc, res.stdout(), res.stderr(), res.timed_out)
    return run


def local_bmc_present(devices: Sequence[str] = LOCAL_DEVICES) -> bool:
    """True when the kernel's IPMI device exists (ipmitool -I open can reach the local BMC)."""
    return any(os.path.exists(d) for d in devices)


def open_source(config: BmcSettings, runner: Optional[Runner] = None,
                environ: Optional[Mapping[str, str]] = None) -> Optional[BmcSource]:
    """The source the config names; None for `none`, and for `auto` without a local BMC."""
    if config.kind == "none" or (config.kind == "auto" and not local_bmc_present()):
        return None
    if config.kind == "redfish":
        return RedfishSource(config, environ)
    return IpmiSource(config, runner, environ)


def _secret_from_file(path_text: str) -> str:
    path = Path(path_text)
    try:
        return path.read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as e:
        raise ToolError(f"bmc: cannot read password file {path}: {e.strerror}") from e


class IpmiSource:
    """Reads `dcmi power reading` and a sensor table with ipmitool, each call with a timeout."""

    def __init__(self, config: BmcSettings, runner: Optional[Runner] = None,
                 environ: Optional[Mapping[str, str]] = None) -> None:
        environ = os.environ if environ is None else environ
        self.config = config
        self._run = runner or default_runner
        self._env: dict[str, str] = {}
        self._argv = ["ipmitool", "-I", config.interface]
        if config.interface != "open":
            self._argv += ["-H", str(config.host)]
            if config.port:
                self._argv += ["-p", str(config.port)]
            user = config.user or (environ.get(config.user_env) if config.user_env else None)
            if user:
                self._argv += ["-U", user]
            if config.privilege:
                self._argv += ["-L", config.privilege]
            if config.cipher_suite is not None:
                self._argv += ["-C", str(config.cipher_suite)]
            if config.password_file:
                if not Path(config.password_file).is_file():
                    raise ToolError(f"bmc: password file {config.password_file} not found")
                self._argv += ["-f", config.password_file]
            else:
                var = config.password_env or "IPMI_PASSWORD"
                if var not in environ:
                    raise ToolError(f"bmc: ipmitool over {config.interface} needs a password:"
                                    f" set {var} (or bmc.password_file)")
                # ipmitool -E prefers IPMITOOL_PASSWORD over IPMI_PASSWORD: set both.
                self._env = {"IPMI_PASSWORD": environ[var], "IPMITOOL_PASSWORD": environ[var]}
                self._argv += ["-E"]
        self._dcmi: Optional[bool] = None if config.dcmi else False
        self._sdr_args: Optional[tuple[str, ...]] = None
        self._cache: Optional[tempfile.TemporaryDirectory[str]] = None
        self._cache_args: list[str] = []  # ["-S", file] once the SDR is dumped
        self.notes: list[str] = []  # what was learned about this BMC (no DCMI...), for the report
        self.last_raw: dict[str, str] = {}

    def describe(self) -> str:
        where = "local BMC (in-band)" if self.config.interface == "open" else \
            f"{self.config.host}" + (f":{self.config.port}" if self.config.port else "")
        return f"ipmitool -I {self.config.interface} {where}"

    def close(self) -> None:
        """Nothing to let go: each read is its own ipmitool process."""

    def read(self) -> BmcReading:
        t = time.time()
        self.last_raw = {}
        dcmi_text, dcmi_why = self._read_dcmi() if self._dcmi is not False else (None, "")
        sdr_text = self._read_sdr()  # raises when the BMC cannot be read at all
        if dcmi_why:  # the BMC answers, but not with a DCMI power reading
            if self._dcmi is None:
                self._dcmi = False  # learned once: not asked again
                self._note(f"{self.describe()}: no DCMI power reading ({dcmi_why});"
                           " node power from sensors")
            else:
                self._note(f"{self.describe()}: a DCMI power reading failed ({dcmi_why});"
                           " that sample's node power is from sensors")
        return ipmi.ipmi_reading(dcmi_text, sdr_text, t, self.describe())

    def _argv_for(self, args: Sequence[str]) -> list[str]:
        cache = self._cache_args if args[0] in ("sdr", "sensor") and "dump" not in args else []
        return [*self._argv, *cache, *args]

    def _call(self, args: Sequence[str], name: str) -> CmdOutput:
        argv = self._argv_for(args)
        out = self._run(argv, self._env, self.config.timeout_s, name)
        self.last_raw[name] = out.stdout
        if out.timed_out:
            raise ToolTimeout(f"{' '.join(argv)}: timed out after {self.config.timeout_s:g} s",
                              argv=argv, rc=out.rc)
        return out

    def _read_dcmi(self) -> tuple[Optional[str], str]:
        """(text, "") for a valid reading, else (None, why): unsupported, deactivated, failed."""
        args = ("dcmi", "power", "reading")
        out = self._call(args, "ipmitool-dcmi")
        reading, problems = ipmi.dcmi_power(out.stdout + "\n" + out.stderr)
        if out.rc == 0 and reading is not None and not problems:
            self._dcmi = True
            return out.stdout, ""
        known = problems and problems[0] != ipmi.NOT_DCMI  # unsupported or deactivated
        return None, problems[0] if known else str(self._failure(args, out))

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _read_sdr(self) -> str:
        if self._sdr_args is not None:
            candidates: Sequence[tuple[str, ...]] = (self._sdr_args,)
        elif self.config.sdr == "power-supply":
            candidates = (("sdr", "type", "Power Supply"), ("sdr", "elist"), ("sensor", "list"))
        else:
            candidates = (("sdr", "elist"), ("sensor", "list"))
        failure: Optional[ToolError] = None
        for args in candidates:
            out = self._call(args, "ipmitool-" + args[0])
            if out.rc == 0 and ipmi_sdr.sensor_rows(out.stdout):
                if self._sdr_args is None and self.config.sdr_cache:
                    self._dump_sdr()
                self._sdr_args = args
                return out.stdout
            failure = failure or self._failure(args, out)
        assert failure is not None
        raise failure

    def _dump_sdr(self) -> None:
        """Keep the BMC's SDR in a local file so later reads fetch only the sensor values."""
        self._cache = tempfile.TemporaryDirectory(prefix="harness-sdr-")
        path = str(Path(self._cache.name) / "sdr.cache")
        out = self._call(("sdr", "dump", path), "ipmitool-sdr-dump")
        if out.rc == 0 and Path(path).is_file() and Path(path).stat().st_size > 0:
            self._cache_args = ["-S", path]
        else:
            why = self._failure(("sdr", "dump", path), out)
            self._note(f"{self.describe()}: no SDR cache ({why}); every read fetches the SDR")

    def _failure(self, args: Sequence[str], out: CmdOutput) -> ToolError:
        argv = self._argv_for(args)
        lines = [ln.strip() for ln in (out.stderr + "\n" + out.stdout).splitlines() if ln.strip()]
        why = lines[-1][:300] if lines else ("no sensor rows" if out.rc == 0 else "no output")
        return ToolError(f"{' '.join(argv)}: exit {out.rc}: {why}", argv=argv, rc=out.rc,
                         output_tail="\n".join(lines[-5:]))


@dataclass
class _Plan:
    chassis: str
    links: dict[str, str] = field(default_factory=dict)


class RedfishSource:
    """Reads a chassis' PowerSubsystem (else its legacy Power) resources over HTTPS."""

    def __init__(self, config: BmcSettings, environ: Optional[Mapping[str, str]] = None) -> None:
        environ = os.environ if environ is None else environ
        self.config = config
        user_var = config.user_env or "REDFISH_USER"
        user = config.user or environ.get(user_var)
        if not user:
            raise ToolError(f"bmc: redfish needs a user: set {user_var} (or bmc.user)")
        if config.password_file:
            password = _secret_from_file(config.password_file)
        else:
            var = config.password_env or "REDFISH_PASSWORD"
            if var not in environ:
                raise ToolError(f"bmc: redfish needs a password: set {var} (or bmc.password_file)")
            password = environ[var]
        context = None
        if config.scheme == "https":
            context = ssl.create_default_context(cafile=config.ca_file)
            if not config.verify_tls:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        self.client = RedfishClient(config.scheme, config.host or "", config.port, user, password,
                                    timeout_s=config.timeout_s, context=context)
        self.base = self.client.base
        self._plan: Optional[_Plan] = None
        self.notes: list[str] = []
        self.last_documents: dict[str, dict[str, Any]] = {}
        self.last_raw: dict[str, str] = {}  # {"redfish-power": the bundle, for `harness parse`}

    def describe(self) -> str:
        where = f"{self.base}{self._plan.chassis}" if self._plan else self.base
        return f"redfish {where}"

    def read(self) -> BmcReading:
        t = time.time()
        if self._plan is None:
            self._plan, docs = self._discover()
        else:
            docs = self._fetch(self._plan)
        self.last_documents = docs
        self.last_raw = {"redfish-power": json.dumps(docs, indent=1, sort_keys=True)}
        return redfish.reading(docs, t, self.describe())

    def get(self, path: str, *, missing_ok: bool = False) -> Optional[dict[str, Any]]:
        """GET one resource as a JSON object; ToolError (one line, no credentials) on failure."""
        doc = self.client.get(path, missing_ok=missing_ok)
        for note in self.client.notes:
            if note not in self.notes:
                self.notes.append(note)
        return doc

    def close(self) -> None:
        """Log out of the BMC's session and close the connection."""
        self.client.close()

    def _must(self, path: str) -> dict[str, Any]:
        doc = self.get(path)
        assert doc is not None
        return doc

    def _discover(self) -> tuple[_Plan, dict[str, dict[str, Any]]]:
        collection = self._must("/redfish/v1/Chassis")
        members = [m["@odata.id"] for m in collection.get("Members", [])
                   if isinstance(m, dict) and isinstance(m.get("@odata.id"), str)]
        if self.config.chassis:
            wanted = [m for m in members if m.rstrip("/").rsplit("/", 1)[-1] == self.config.chassis]
            if not wanted:
                ids = ", ".join(m.rstrip("/").rsplit("/", 1)[-1] for m in members) or "none"
                raise ToolError(f"redfish {self.base}: no chassis {self.config.chassis!r} (found: {ids})")
            members = wanted
        fallback: Optional[tuple[_Plan, dict[str, dict[str, Any]]]] = None
        for member in members:
            chassis = self._must(member)
            links = {k: v["@odata.id"] for k, v in chassis.items()
                     if k in ("PowerSubsystem", "Power", "EnvironmentMetrics")
                     and isinstance(v, dict) and isinstance(v.get("@odata.id"), str)}
            if "PowerSubsystem" not in links and "Power" not in links:
                continue
            plan = _Plan(member, links)
            docs = self._fetch(plan)
            found = redfish.reading(docs, 0.0)
            if found.node_power_w is not None or found.psus:
                return plan, docs
            fallback = fallback or (plan, docs)
        if fallback is None:
            raise ToolError(f"redfish {self.base}: no chassis with Power or PowerSubsystem"
                            " under /redfish/v1/Chassis")
        return fallback

    def _fetch(self, plan: _Plan) -> dict[str, dict[str, Any]]:
        """The power resources of one read: PowerSubsystem and its PSUs with their Metrics,
        EnvironmentMetrics; the legacy Power when those give no node power (or do not exist)."""
        docs: dict[str, dict[str, Any]] = {}

        def keep(path: str, missing_ok: bool = False) -> Optional[dict[str, Any]]:
            doc = self.get(path, missing_ok=missing_ok)
            if doc is not None:
                docs[str(doc.get("@odata.id") or path)] = doc
            return doc

        if "PowerSubsystem" in plan.links:
            sub = keep(plan.links["PowerSubsystem"]) or {}
            coll_link = (sub.get("PowerSupplies") or {}).get("@odata.id")
            coll = self._must(coll_link) if isinstance(coll_link, str) else {}
            for member in coll.get("Members", []):
                if isinstance(member, dict) and isinstance(member.get("@odata.id"), str):
                    psu = keep(member["@odata.id"]) or {}
                    metrics = (psu.get("Metrics") or {}).get("@odata.id")
                    if isinstance(metrics, str):
                        keep(metrics, missing_ok=True)
        if "EnvironmentMetrics" in plan.links:
            keep(plan.links["EnvironmentMetrics"], missing_ok=True)
        if "Power" in plan.links and redfish.analyse(docs).node_power_w is None:
            keep(plan.links["Power"])
        return docs
