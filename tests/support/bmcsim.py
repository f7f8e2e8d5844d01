"""A real IPMI BMC for tests: OpenIPMI's ipmi_sim on a free loopback port, read by real ipmitool.

ipmi_sim (Debian openipmi) speaks IPMI 2.0 RMCP+ (`ipmitool -I lanplus`) as a BMC does. Its
sensors come from SDRs that sdrcomp (same package) compiles from `SDRS` below: two PSUs with
input power and a Power Supply status sensor each, a PSU redundancy sensor, a node power meter,
an inlet temperature and a fan with a lower critical threshold. ipmi_sim emulates no DCMI (it
answers "Invalid command (c1)"); tests/bmcsim_dcmi.c, compiled with gcc against libopenipmi-dev
and loaded with `loadlib`, answers DCMI Get Power Reading from a file, so `ipmitool dcmi power
reading` runs end to end too. A console on a free TCP port changes sensor states while it runs.
Skipped when the tools are missing, except under CI=true (CI installs them: scripts/setup.sh).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.config.bmc import BmcConfig

HERE = Path(__file__).resolve().parent
TOOLS = ("ipmi_sim", "sdrcomp", "ipmitool")
BMC = "0x20"
# key: (sensor number, sensor type, event/reading type). Every name has a lower-case letter:
# sdrcomp packs an all-capitals name as 6-bit ASCII, which ipmitool prints as garbage.
SENSORS = {
    "psu1_in": (0x10, 0x0B, 0x01), "psu2_in": (0x11, 0x0B, 0x01),
    "psu1_status": (0x12, 0x08, 0x6F), "psu2_status": (0x13, 0x08, 0x6F),
    "redundancy": (0x14, 0x08, 0x0B), "meter": (0x15, 0x0B, 0x01),
    "inlet": (0x16, 0x01, 0x01), "fan": (0x17, 0x04, 0x01),
}
# healthy: PSUs 480 W + 500 W in (m = 10 W per count), present; fully redundant; meter 950 W;
# inlet 23 C; fan 8000 RPM (m = 100 RPM per count, lower critical 1000 RPM)
HEALTHY_VALUES = {"psu1_in": 48, "psu2_in": 50, "meter": 95, "inlet": 23, "fan": 80}
HEALTHY_BITS = {"psu1_status": 0, "psu2_status": 0, "redundancy": 0}

_ANALOG = """sdr type 1
\tsensor_owner_id 0x20
\tsensor_owner_lun 0
\tchannel_number 0
\tsensor_number {num}
\tentity_id {entity}
\tentity_instance {instance}
\tsensor_type {stype}
\tinit_scanning true
\tdefault_sensor_scan_on true
\tevent_reading_type_code 1
\tanalog_data_format unsigned
\trate_unit none
\tmodifier_unit none
\tpercentage false
\tbase_unit {unit}
\tmodifier_unit_code unspecified
\tlinearization linear
\tm {m}
\ttolerance 0
\tb 0
\taccuracy 1
\taccuracy_exp 0
\tsensor_direction input
\tr_exp 0
\tb_exp 0
\tsensor_maximum 255
\tsensor_minimum 0
\tid_string "{name}"
endsdr
"""
_DISCRETE = """sdr type 2
\tsensor_owner_id 0x20
\tsensor_owner_lun 0
\tchannel_number 0
\tsensor_number {num}
\tentity_id {entity}
\tentity_instance {instance}
\tsensor_type Power_Supply
\tinit_scanning true
\tdefault_sensor_scan_on true
\tevent_reading_type_code {code}
\tid_string "{name}"
endsdr
"""
SDRS = "".join([
    """sdr type 18
\tdevice_slave_address 0x20
\tdevice_channel_number 0
\tchassis true
\tipmb_event_gen false
\tipmb_event_recv false
\tfru_inventory false
\tsel true
\tsdr true
\tsensor true
\tentity_id system_board
\tentity_instance 1
\tid_string "harness sim"
endsdr
""",
    _ANALOG.format(num=0x10, entity="power_supply", instance=1, stype="Other_Units_Based_Sensor",
                   unit="Watts", m=10, name="PSU1 Power In"),
    _ANALOG.format(num=0x11, entity="power_supply", instance=2, stype="Other_Units_Based_Sensor",
                   unit="Watts", m=10, name="PSU2 Power In"),
    _DISCRETE.format(num=0x12, entity="power_supply", instance=1, code="0x6f", name="PSU1 Status"),
    _DISCRETE.format(num=0x13, entity="power_supply", instance=2, code="0x6f", name="PSU2 Status"),
    _DISCRETE.format(num=0x14, entity="power_unit", instance=1, code="0x0b", name="PS Redundancy"),
    _ANALOG.format(num=0x15, entity="system_board", instance=1, stype="Other_Units_Based_Sensor",
                   unit="Watts", m=10, name="Pwr Consumption"),
    _ANALOG.format(num=0x16, entity="system_board", instance=1, stype="Temperature",
                   unit="degrees_C", m=1, name="Inlet Temp"),
    _ANALOG.format(num=0x17, entity="fan_cooling_device", instance=1, stype="Fan",
                   unit="RPM", m=100, name="System Fan1"),
])


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def require_sim(*, dcmi: bool = False) -> None:
    """Skip (fail under CI=true) when ipmi_sim, sdrcomp, ipmitool (or, for DCMI, gcc and the
    OpenIPMI headers) are not installed."""
    missing = missing_tools()
    if dcmi and (shutil.which("gcc") is None or not Path("/usr/include/OpenIPMI/mcserv.h").exists()):
        missing.append("gcc + libopenipmi-dev")
    if missing:
        msg = (f"BMC simulator needs {', '.join(missing)}:"
               " apt-get install openipmi ipmitool gcc libopenipmi-dev")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; CI=true requires them", pytrace=False)
        pytest.skip(msg)


@dataclass
class BmcSim:
    """A running ipmi_sim; `config()` is how IpmiSource reaches it."""

    dir: Path
    port: int
    console_port: int
    user: str
    password: str
    proc: subprocess.Popen[bytes]
    dcmi_file: Path | None
    # the asserted offsets of each discrete sensor as last set here; a change sends only the
    # offsets that differ (the console is slow on a loaded machine: fewer commands, less wait)
    bits: dict[str, frozenset[int]] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return {"IPMI_PASSWORD": self.password}

    def config(self, **overrides: Any) -> BmcConfig:
        fields: dict[str, Any] = {"kind": "ipmi", "interface": "lanplus", "host": "127.0.0.1",
                                  "port": self.port, "user": self.user, "cipher_suite": 3,
                                  "timeout_s": 30.0}
        return BmcConfig(**{**fields, **overrides})

    def command(self, line: str) -> str:
        """One emulator command on the console; AssertionError when ipmi_sim reports an error."""
        return self.commands([line])[0]

    def commands(self, lines: list[str]) -> list[str]:
        """Emulator commands over one console connection (a connection per command starves the
        console when the machine is loaded, as the power tests load it); one retry on a timeout or
        a dropped connection."""
        for attempt in (1, 2):
            try:
                with socket.create_connection(("127.0.0.1", self.console_port), timeout=30) as s:
                    _read_prompt(s)
                    replies = []
                    for line in lines:
                        s.sendall(line.encode() + b"\n")
                        replies.append(_read_prompt(s))
                break
            except (TimeoutError, ConnectionError):
                if attempt == 2:
                    raise
        for line, reply in zip(lines, replies, strict=True):
            if "**" in reply:
                raise AssertionError(f"ipmi_sim: {line}: {reply.strip()}")
        return replies

    def set_value(self, sensor: str, raw: int) -> None:
        self.command(f"sensor_set_value {BMC} 0 {SENSORS[sensor][0]:#x} {raw} 0")

    def set_bits(self, sensor: str, *bits: int) -> None:
        """Assert exactly these state offsets of a discrete sensor (none: nothing asserted)."""
        num, want, known = SENSORS[sensor][0], frozenset(bits), self.bits.get(sensor)
        change = range(15) if known is None else sorted(want ^ known)
        if change:
            self.commands([f"sensor_set_bit {BMC} 0 {num:#x} {bit} {1 if bit in want else 0} 0"
                           for bit in change])
        self.bits[sensor] = want

    def set_dcmi(self, instantaneous: int, minimum: int, maximum: int, average: int,
                 period_s: int = 300, active: bool = True) -> None:
        assert self.dcmi_file is not None, "started without the DCMI module"
        self.dcmi_file.write_text(f"{instantaneous} {minimum} {maximum} {average} {period_s} {int(active)}\n")

    def reset(self) -> None:
        """Back to the healthy state: both PSUs present, fully redundant, DCMI 980 W."""
        for key, raw in HEALTHY_VALUES.items():
            self.set_value(key, raw)
        for key, bit in HEALTHY_BITS.items():
            self.set_bits(key, bit)
        if self.dcmi_file is not None:
            self.set_dcmi(980, 950, 1010, 975)

    def ipmitool(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = ["ipmitool", "-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", str(self.port),
                "-U", self.user, "-E", *args]
        return subprocess.run(argv, env={**os.environ, **self.env()}, capture_output=True,
                              text=True, timeout=60, check=False)


def _read_prompt(s: socket.socket) -> str:
    data = b""
    while not data.endswith(b"> "):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace")


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _emu_file(raw_sdrs: bytes) -> str:
    lines = [f"mc_setbmc {BMC}", f"mc_add {BMC} 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02"]
    pos = 0
    while pos < len(raw_sdrs):
        end = pos + 5 + raw_sdrs[pos + 4]
        lines.append(f"main_sdr_add {BMC} " + " ".join(f"0x{b:02x}" for b in raw_sdrs[pos:end]))
        pos = end
    for num, stype, code in SENSORS.values():
        lines.append(f"sensor_add {BMC} 0 {num:#x} {stype:#x} {code:#x}")
    # the fan's lower critical threshold: 10 counts = 1000 RPM
    lines.append(f"sensor_set_threshold {BMC} 0 {SENSORS['fan'][0]:#x} settable 000010 0 0 0 0 10 0")
    lines.append(f"mc_enable {BMC}")
    return "\n".join(lines) + "\n"


def _build_dcmi_module(work: Path) -> Path:
    out = work / "bmcsim_dcmi.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wall", "-O2", "-o", str(out),
                    str(HERE / "bmcsim_dcmi.c")], check=True, capture_output=True, timeout=120)
    return out


@contextmanager
def bmc_sim(work: Path, *, dcmi: bool = True) -> Iterator[BmcSim]:
    """Start ipmi_sim in `work` (SDRs, config, state all there), yield it healthy, stop it."""
    require_sim(dcmi=dcmi)
    work.mkdir(parents=True, exist_ok=True)
    (work / "sim.sdrs").write_text(SDRS)
    raw = subprocess.run(["sdrcomp", "-r", str(work / "sim.sdrs")], check=True,
                         capture_output=True, timeout=60).stdout
    (work / "sim.emu").write_text(_emu_file(raw))
    port, console_port = _free_port(socket.SOCK_DGRAM), _free_port(socket.SOCK_STREAM)
    user, password = "harness", "pw-" + secrets.token_hex(8)
    dcmi_file = work / "dcmi-power.txt" if dcmi else None
    loadlib = f'  loadlib "{_build_dcmi_module(work)}" "{dcmi_file}"\n' if dcmi else ""
    (work / "lan.conf").write_text(
        'name "harnesssim"\nset_working_mc 0x20\n  startlan 1\n'
        f"    addr 127.0.0.1 {port}\n    priv_limit admin\n"
        "    allowed_auths_callback md5\n    allowed_auths_user md5\n"
        "    allowed_auths_operator md5\n    allowed_auths_admin md5\n"
        "    guid a123456789abcdefa123456789abcdef\n  endlan\n"
        f"{loadlib}  console 127.0.0.1 {console_port}\n"
        f'  user 2 true "{user}" "{password}" admin 10 md5\n')
    (work / "state").mkdir(exist_ok=True)
    log = open(work / "ipmi_sim.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(["ipmi_sim", "-c", str(work / "lan.conf"), "-f", str(work / "sim.emu"),
                             "-s", str(work / "state"), "-n"], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=work)
    sim = BmcSim(work, port, console_port, user, password, proc, dcmi_file)
    try:
        _wait_ready(sim)
        sim.reset()
        yield sim
    finally:
        _stop(proc)
        log.close()


def _wait_ready(sim: BmcSim, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if sim.proc.poll() is not None:
            raise AssertionError(f"ipmi_sim exited {sim.proc.returncode}: "
                                 + (sim.dir / "ipmi_sim.log").read_text(errors="replace")[-500:])
        try:
            sim.command("# ping")
            if sim.ipmitool("mc", "info").returncode == 0:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"ipmi_sim not ready after {timeout:g} s")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
