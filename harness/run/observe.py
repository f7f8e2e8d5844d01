"""`harness observe`: watch the node, some processes or a command for a window, then say what held
the work back (series.stall) in one sentence, as text or one JSON object.

Exit status: 0 observed (whatever the verdict), 2 bad arguments, 3 could not observe (no
samples, the command could not start, /proc unreadable), 128+N interrupted by signal N (the
command's process group is stopped first).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.checks.observer import Observer, watch
from harness.errors import HarnessError, Interrupted, UsageError, printable
from harness.fsutil import atomic_write_json
from harness.platform import workload
from harness.platform.nvml import NvmlSession, NvmlUnavailable
from harness.platform.procfs import ProcFs
from harness.series.observed import Window
from harness.series.stall import THRESHOLDS, Diagnosis, Thresholds, diagnose

DEFAULT_DURATION_S = 30.0
MAX_DURATION_S = 7 * 24 * 3600.0
MIN_INTERVAL_S = 0.05


class ObserveError(HarnessError):
    """The observation could not be made (exit 3)."""


@dataclass(frozen=True)
class Request:
    """What to watch and how: validated arguments."""

    pids: tuple[int, ...] = ()
    command: tuple[str, ...] = ()
    duration_s: Optional[float] = None  # None: until the command exits (the default window otherwise)
    interval_s: float = 1.0
    thresholds: Thresholds = THRESHOLDS


def validate(req: Request, root: Path = Path("/")) -> Request:
    """The request with its window settled; UsageError (exit 2) for arguments that cannot work."""
    if req.pids and req.command:
        raise UsageError("give --pid or a command after --, not both")
    if not MIN_INTERVAL_S <= req.interval_s <= 3600:
        raise UsageError(f"--interval must be between {MIN_INTERVAL_S} and 3600 s, not {req.interval_s:g}")
    duration = req.duration_s
    if duration is None and not req.command:
        duration = DEFAULT_DURATION_S
    if duration is not None and not 0 < duration <= MAX_DURATION_S:
        raise UsageError(f"--duration must be between 0 and {MAX_DURATION_S:.0f} s, not {duration:g}")
    if duration is not None and req.interval_s > duration:
        raise UsageError(f"--interval {req.interval_s:g} s is longer than the window ({duration:g} s)")
    fs = ProcFs(root)
    for pid in req.pids:
        if pid <= 0 or fs.task(pid) is None:
            raise UsageError(f"--pid {pid}: no such process")
    return Request(tuple(dict.fromkeys(req.pids)), req.command, duration, req.interval_s, req.thresholds)


def _nvml() -> Optional[NvmlSession]:
    try:
        return NvmlSession()
    except NvmlUnavailable:
        return None


def observe(req: Request, *, root: Path = Path("/"), command_output: Any = None) -> Window:
    """Watch as `req` says and return the window (ObserveError when nothing could be sampled)."""
    req = validate(req, root)
    nvml = _nvml()
    try:
        if req.command:
            proc = workload.start(req.command, stdout=command_output)
            try:
                obs = Observer((proc.pid,), scope="command", root=root, nvml=nvml)
                watch(obs, duration=req.duration_s, interval=req.interval_s,
                      finished=lambda t: workload.finished(proc, t))
                running = proc.poll() is None
            finally:
                workload.stop(proc)
            command: dict[str, Any] = {"argv": list(req.command), "rc": proc.returncode, "stopped": running}
            window = obs.window(req.interval_s, command)
        else:
            obs = Observer(req.pids, root=root, nvml=nvml)
            watch(obs, duration=req.duration_s, interval=req.interval_s, finished=_sleep)
            window = obs.window(req.interval_s)
    finally:
        if nvml is not None:
            nvml.close()
    if not window.ticks:
        raise ObserveError("could not observe: no two readings were taken (the workload ended at once, "
                           "or /proc is unreadable)")
    if window.sources.get("cpu") != "ok":
        raise ObserveError(f"could not observe: /proc/stat unreadable under {root}")
    return window


def _sleep(timeout: float) -> bool:
    time.sleep(timeout)
    return False


def as_json(window: Window, diag: Diagnosis) -> dict[str, Any]:
    """The one JSON object `harness observe --json` prints."""
    out = diag.to_dict()
    out["window"] = {"scope": window.scope, "started": window.started, "duration_s": window.duration_s,
                     "interval_s": window.interval_s, "samples": len(window.ticks), "pids": list(window.pids),
                     "cgroup": window.cgroup, "command": dict(window.command) or None,
                     "sources": dict(window.sources)}
    return out


def as_text(window: Window, diag: Diagnosis) -> str:
    """The verdict, then one line per finding, then what was watched."""
    lines = [printable(diag.verdict)]  # it may name a process: its comm is anyone's to choose
    for f in diag.findings:
        lines.append(f"  {f.resource:<10} {100 * f.share:3.0f}%  {printable(f.evidence)}")
        for p in f.processes:
            lines.append(f"  {'':<10}       {_safe(p.comm)} (pid {p.pid}) {p.what}")
    what = {"node": "the node", "pids": "pid " + ", ".join(map(str, window.pids)),
            "command": " ".join(_safe(a) for a in window.command.get("argv", []))}[window.scope]
    lines.append(f"watched {what} for {window.duration_s:.1f} s, {len(window.ticks)} samples every "
                 f"{window.interval_s:g} s" + (f"; cgroup {window.cgroup}" if window.cgroup not in (None, "/")
                                               else ""))
    missing = [f"{k} ({v})" for k, v in window.sources.items() if v != "ok" and v != "node scope"]
    if missing:
        lines.append("not observed: " + ", ".join(missing))
    rc = window.command.get("rc")
    if rc is not None:
        lines.append(f"command exit status {rc}" + (" (stopped at the end of the window)"
                                                    if window.command.get("stopped") else ""))
    return "\n".join(lines)


def _safe(text: str) -> str:
    """A process name or argument without control characters (a hostile comm cannot drive the terminal)."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


def write_outputs(directory: Path, window: Window, diag: Diagnosis) -> None:
    """observe.json (the verdict object) and series.json (the window, for later replays)."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_json(directory / "observe.json", as_json(window, diag))
    atomic_write_json(directory / "series.json", window.to_dict())


def main(pids: Sequence[int], command: Sequence[str], duration: Optional[float], interval: float,
         output: Optional[Path], as_json_: bool, thresholds: Mapping[str, float] | None = None) -> int:
    """The command behind `harness observe`; returns the exit status."""
    try:
        th = THRESHOLDS.with_overrides(thresholds or {})
    except ValueError as e:
        raise UsageError(str(e)) from e
    if output is not None and output.exists() and not output.is_dir():
        raise UsageError(f"--output {output}: not a directory (observe.json and series.json are written "
                         "into it)")
    req = Request(tuple(pids), tuple(command), duration, interval, th)

    def interrupted(signum: int, _frame: object) -> None:
        raise Interrupted(signum)

    # SIGTERM unwinds like Ctrl-C does, so the workload's process group is stopped on the way out
    old = signal.signal(signal.SIGTERM, interrupted)
    try:
        # with --json the command's stdout goes to stderr: stdout carries exactly one JSON object
        window = observe(req, command_output=2 if as_json_ else None)
    except Interrupted as e:
        print(f"interrupted by signal {e.signum}: nothing concluded", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("interrupted: nothing concluded", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, old)
    diag = diagnose(window, th)
    if output is not None:
        write_outputs(output, window, diag)
    if as_json_:
        print(json.dumps(as_json(window, diag), indent=2))
    else:
        print(as_text(window, diag))
    return 0
