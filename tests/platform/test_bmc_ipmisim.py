"""IpmiSource end to end: real ipmitool over RMCP+ to a real ipmi_sim (tests/support/bmcsim.py).

The simulator's PSUs, redundancy sensor, fan and DCMI reading are changed while it runs, as a
PSU that loses AC during a load would change them. Skipped without ipmi_sim/ipmitool (and gcc +
libopenipmi-dev for the DCMI module), except under CI=true.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from bmcsim import BmcSim, bmc_sim

from harness.checks.base import CheckContext
from harness.config.bmc import BmcConfig
from harness.errors import ToolError, ToolMissing, ToolTimeout
from harness.parsers import ipmi
from harness.platform import bmc
from harness.platform.bmc import CmdOutput, IpmiSource, default_runner, open_source, tool_runner


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BmcSim]:
    with bmc_sim(tmp_path_factory.mktemp("ipmisim")) as running:
        yield running


@pytest.fixture(autouse=True)
def _healthy(request: pytest.FixtureRequest) -> None:
    if "sim" in request.fixturenames:
        request.getfixturevalue("sim").reset()


def _recording(calls: list[list[str]], fail: Sequence[str] = ()) -> bmc.Runner:
    """The real runner, recording argv; commands whose words contain `fail` exit 1 unrun."""
    def run(argv: Sequence[str], env: Mapping[str, str], timeout_s: float, name: str) -> CmdOutput:
        calls.append(list(argv))
        if fail and all(word in argv for word in fail):
            return CmdOutput(1, "", "simulated failure of this command\n")
        return default_runner(argv, env, timeout_s, name)
    return run


def test_healthy_node(sim: BmcSim) -> None:
    source = open_source(sim.config(), environ=sim.env())
    assert isinstance(source, IpmiSource)
    reading = source.read()
    assert reading.node_power_w == 980 and reading.source.endswith("(node power: dcmi)")
    assert [(p.name, p.ok, p.power_in_w) for p in reading.psus] == [("PSU1", True, 480), ("PSU2", True, 500)]
    assert reading.redundant is True and reading.inlet_temp_c == 23 and reading.fans_ok is True
    assert source.notes == []
    assert source.describe() == f"ipmitool -I lanplus 127.0.0.1:{sim.port}"
    assert ipmi.parse_dcmi(source.last_raw["ipmitool-dcmi"]).valid  # the kept evidence
    assert len(ipmi.parse_sdr(source.last_raw["ipmitool-sdr"]).details["psus"]) == 2


def test_psu_loses_ac_then_is_pulled_during_reads(sim: BmcSim) -> None:
    source = IpmiSource(sim.config(), environ=sim.env())
    assert all(p.ok for p in source.read().psus)
    sim.set_bits("psu2_status", 0, 3)  # presence + AC lost
    sim.set_bits("redundancy", 1)  # redundancy lost
    sim.set_dcmi(1480, 950, 1500, 1210)
    lost = source.read()
    assert lost.node_power_w == 1480
    assert [(p.name, p.ok) for p in lost.psus] == [("PSU1", True), ("PSU2", False)]
    assert lost.psus[1].status == "PSU2 Status: Presence detected, Power Supply AC lost"
    assert lost.redundant is False
    sim.set_bits("psu2_status")  # pulled: no presence bit
    pulled = source.read()
    assert pulled.psus[1].ok is False and pulled.psus[1].status == "PSU2 Status: no state asserted"


def test_sdr_is_dumped_once_then_read_from_the_cache(sim: BmcSim) -> None:
    calls: list[list[str]] = []
    source = IpmiSource(sim.config(), _recording(calls), sim.env())
    first = source.read()
    assert [argv[argv.index("-E") + 1:][:2] for argv in calls] == [
        ["dcmi", "power"], ["sdr", "elist"], ["sdr", "dump"]]
    sim.set_bits("psu1_status", 0, 3)
    second = source.read()
    cached = calls[-1]
    assert cached[cached.index("-S") + 1] == calls[2][-1] and cached[-2:] == ["sdr", "elist"]
    assert second.psus[0].ok is False and first.psus[0].ok is True  # values still live
    no_cache = IpmiSource(sim.config(sdr_cache=False), _recording(calls := []), sim.env())
    no_cache.read()
    no_cache.read()
    assert not any("-S" in argv or "dump" in argv for argv in calls)


def test_fan_below_its_critical_threshold(sim: BmcSim) -> None:
    sim.set_value("fan", 5)  # 500 RPM, lower critical 1000 RPM
    assert IpmiSource(sim.config(), environ=sim.env()).read().fans_ok is False


def test_deactivated_dcmi_falls_back_to_the_meter_sensor_and_is_not_asked_again(sim: BmcSim) -> None:
    sim.set_dcmi(0, 0, 0, 0, 0, active=False)
    calls: list[list[str]] = []
    source = IpmiSource(sim.config(), _recording(calls), sim.env())
    first, second = source.read(), source.read()
    assert first.node_power_w == second.node_power_w == 950
    assert "sensor 'Pwr Consumption'" in first.source
    assert len(source.notes) == 1 and "state is deactivated" in source.notes[0]
    assert sum("dcmi" in argv for argv in calls) == 1


def test_dcmi_zero_watts_is_not_used(sim: BmcSim) -> None:
    sim.set_dcmi(0, 0, 0, 0, 300, active=True)
    source = IpmiSource(sim.config(), environ=sim.env())
    assert source.read().node_power_w == 950
    assert "0 W for a running node" in source.notes[0]


def test_power_supply_sdr_type(sim: BmcSim) -> None:
    calls: list[list[str]] = []
    reading = IpmiSource(sim.config(sdr="power-supply"), _recording(calls), sim.env()).read()
    assert calls[1][-3:] == ["sdr", "type", "Power Supply"]
    # the PSUs' watt sensors are not of type Power Supply here: status only
    assert [(p.name, p.ok, p.power_in_w) for p in reading.psus] == [("PSU1", True, None),
                                                                    ("PSU2", True, None)]
    assert reading.redundant is True and reading.node_power_w == 980 and reading.inlet_temp_c is None


def test_falls_back_to_sensor_list(sim: BmcSim) -> None:
    calls: list[list[str]] = []
    sim.set_bits("psu1_status", 0, 1)  # failure detected
    source = IpmiSource(sim.config(), _recording(calls, fail=("sdr", "elist")), sim.env())
    reading = source.read()
    assert [argv[-2:] for argv in calls[:3]] == [["power", "reading"], ["sdr", "elist"], ["sensor", "list"]]
    assert [(p.name, p.ok, p.power_in_w) for p in reading.psus] == [("PSU1", False, 480), ("PSU2", True, 500)]
    source.read()  # sticks with what worked
    assert calls[-1][-2:] == ["sensor", "list"] and ["sdr", "elist"] not in [a[-2:] for a in calls[4:]]


def test_password_never_on_argv_in_results_or_raw_output(sim: BmcSim, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPMITOOL_PASSWORD", "stale-and-wrong")  # ipmitool -E prefers this one
    ctx = CheckContext("power", tmp_path, 60, False, False, {}, logging.getLogger("test"))
    source = IpmiSource(sim.config(password_env="NODE_BMC_PW"), tool_runner(ctx.run_tool),
                        {"NODE_BMC_PW": sim.password})
    reading = source.read()
    assert reading.node_power_w == 980
    assert [Path(r.stdout_file).name for r in ctx.tool_runs] == [
        "01-ipmitool-dcmi.stdout", "02-ipmitool-sdr.stdout", "03-ipmitool-sdr-dump.stdout"]
    assert all("-E" in r.argv for r in ctx.tool_runs)
    for run in ctx.tool_runs:
        assert sim.password not in " ".join(run.argv) and sim.password not in str(run.to_dict())
    for f in tmp_path.rglob("*"):
        assert sim.password not in f.name
        if f.is_file():
            assert sim.password not in f.read_text(errors="replace")
    assert sim.password not in repr(reading) + source.describe() + " ".join(source.notes)


def test_password_file(sim: BmcSim, tmp_path: Path) -> None:
    secret = tmp_path / "ipmi.pw"
    secret.write_text(sim.password + "\n")
    calls: list[list[str]] = []
    reading = IpmiSource(sim.config(password_file=str(secret)), _recording(calls), {}).read()
    assert reading.node_power_w == 980
    assert calls[0][calls[0].index("-f") + 1] == str(secret) and "-E" not in calls[0]


def test_wrong_password_names_the_command(sim: BmcSim) -> None:
    with pytest.raises(ToolError) as err:
        IpmiSource(sim.config(), environ={"IPMI_PASSWORD": "x" + sim.password[1:]}).read()
    msg = str(err.value)
    assert msg.startswith(f"ipmitool -I lanplus -H 127.0.0.1 -p {sim.port} -U harness -C 3 -E"
                          " sdr elist: exit 1:")
    assert "Unable to establish IPMI v2 / RMCP+ session" in msg and sim.password not in msg


def test_bmc_without_dcmi(tmp_path: Path) -> None:
    with bmc_sim(tmp_path / "plain", dcmi=False) as plain:
        calls: list[list[str]] = []
        source = IpmiSource(plain.config(), _recording(calls), plain.env())
        first, second = source.read(), source.read()
    assert first.node_power_w == second.node_power_w == 950  # the meter sensor
    assert "Invalid command (c1)" in source.notes[0] and "node power from sensors" in source.notes[0]
    assert sum("dcmi" in argv for argv in calls) == 1


def test_silent_bmc_times_out(tmp_path: Path) -> None:
    pytest.importorskip("bmcsim").require_sim()
    config = BmcConfig(kind="ipmi", interface="lanplus", host="127.0.0.1", port=9, user="x",
                       cipher_suite=3, timeout_s=2.0)
    with pytest.raises(ToolTimeout, match=r"dcmi power reading: timed out after 2 s"):
        IpmiSource(config, environ={"IPMI_PASSWORD": "x"}).read()


def test_in_band_without_a_local_bmc() -> None:
    pytest.importorskip("bmcsim").require_sim()
    if bmc.local_bmc_present():
        pytest.skip("this machine has a local BMC")
    assert open_source(BmcConfig()) is None  # auto: no local BMC, no source
    with pytest.raises(ToolError, match=r"^ipmitool -I open sdr elist: exit 1: Could not open device"):
        IpmiSource(BmcConfig(kind="ipmi")).read()


def test_missing_ipmitool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissing, match="ipmitool not found; install it with: apt-get install ipmitool"):
        IpmiSource(BmcConfig(kind="ipmi")).read()


def test_remote_needs_a_password() -> None:
    config = BmcConfig(kind="ipmi", interface="lanplus", host="bmc01", user="admin")
    with pytest.raises(ToolError, match="needs a password: set IPMI_PASSWORD"):
        IpmiSource(config, environ={})
    with pytest.raises(ToolError, match="password file /nonexistent/pw not found"):
        IpmiSource(config.model_copy(update={"password_file": "/nonexistent/pw"}), environ={})


def test_local_device_detection(tmp_path: Path) -> None:
    dev = tmp_path / "ipmi0"
    assert not bmc.local_bmc_present([str(dev)])
    dev.touch()
    assert bmc.local_bmc_present([str(dev)])
