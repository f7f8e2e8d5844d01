"""Parse the output of wilicc/gpu-burn (`gpu_burn`) into per-GPU burn metrics.

Pure: text in, ParseResult out. gpu_burn redraws one progress line with carriage returns
("\\r60.0%  proc'd: 10 (2047 Gflop/s) - ...   errors: 0 - 0   temps: 46 C - 51 C"), resets its
error counters at each "Summary at:" line, and ends with a verdict block ("Tested N GPUs:" then
"GPU n: OK|FAULTY"). It says "OK" for a GPU that processed nothing and exits 0 with FAULTY GPUs,
so the verdict alone proves nothing:

* no verdict block (crash, abort, cut-off output) -> invalid;
* a GPU whose process DIED (proc'd -1) or that never reported work, yet is called OK -> invalid;
* FAULTY -> valid, `gpu_burn.ok` 0 and the error count (a hardware failure, judged by rules);
* a GPU whose process died while others worked is named in details.dead (it failed the burn).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid
from harness.units import CELSIUS, COUNT, TFLOPS

KIND = "gpu-burn"
_CALC = re.compile(r"(?<![\d-])(-?\d{1,19})\s*\(\s*(-?[\d.]+|-?nan|-?inf)\s*Gflop/s\s*\)", re.IGNORECASE)
_ERR = re.compile(r"(?<!\d)(-?\d{1,19})(?!\d)\s*(\((?:WARNING|DIED)!\))?")
_TEMP_SEP = re.compile(r"(?<!\s)\s+-\s+")
_TEMP = re.compile(r"^(-?\d{1,4})\s*C$")
_LISTED = re.compile(r"^GPU (\d{1,9}): (.+?) \(UUID: ([^)]*)\)")
_TESTED = re.compile(r"Tested (\d{1,9}) GPUs:")
_VERDICT = re.compile(r"GPU (\d{1,9}): (OK|FAULTY)\b")
_FATAL = (
    (re.compile(r"No clients are alive!"), "every GPU process died (\"No clients are alive!  Aborting\")"),
    (re.compile(r"terminate called after throwing[^\n]*"), None),
    (re.compile(r"^No CUDA devices\s*$", re.MULTILINE), "gpu_burn found no CUDA devices"),
    (re.compile(r"Couldn't init a GPU test:[^\n]*"), None),
)


@dataclass
class _Gpu:
    """What the output says about one GPU (mutable while parsing)."""

    iterations: int | None = None
    gflops: float | None = None
    temp_max: float | None = None
    errors_total: int = 0
    errors_period: int = 0
    overflowed: bool = False
    died: bool = False
    verdict: str | None = None
    name: str | None = None
    uuid: str | None = None


@dataclass
class _State:
    gpus: dict[int, _Gpu] = field(default_factory=dict)
    progress_lines: int = 0
    garbled: int = 0

    def gpu(self, i: int) -> _Gpu:
        return self.gpus.setdefault(i, _Gpu())


def _segments(text: str) -> list[str]:
    """Lines, with each carriage-return redraw of the progress line as its own segment."""
    return [s for line in text.replace("\r\n", "\n").split("\n") for s in line.split("\r")]


def _after(text: str, word: str) -> tuple[str, str] | None:
    """(text before the first `word` that follows white space, stripped; the text after it)."""
    j = text.find(word)
    while j != -1 and (j == 0 or not text[j - 1].isspace()):
        j = text.find(word, j + 1)
    return None if j == -1 else (text[:j].strip(), text[j + len(word):].strip())


def _fields(seg: str) -> tuple[str, str, str | None] | None:
    """The "proc'd:", "errors:" and "temps:" fields of a progress segment (linear: no regex
    that backtracks over a long garbled line)."""
    body = seg[seg.index("proc'd:") + len("proc'd:"):]
    split = _after(body, "errors:")
    if split is None:
        return None
    calc, rest = split
    at_temps, at_power = _after(" " + rest, "temps:"), _after(" " + rest, "power:")
    if at_temps is None or (at_power is not None and len(at_power[0]) < len(at_temps[0])):
        return calc, at_power[0] if at_power else rest, None
    errors, temps = at_temps
    power = _after(" " + temps, "power:")
    return calc, errors, power[0] if power else temps


def _progress(seg: str, st: _State) -> None:
    fields = _fields(seg)
    if fields is None:
        return
    calc, err, temp = fields
    calcs = _CALC.findall(calc)
    errs = _ERR.findall(err)
    temps = [t.strip() for t in _TEMP_SEP.split(temp)] if temp else []
    leftover = _CALC.sub("", calc).strip(" -") + _ERR.sub("", err).strip(" -")
    if (not calcs or leftover or len(errs) != len(calcs) or (temps and len(temps) != len(calcs))
            or any(t != "--" and not _TEMP.match(t) for t in temps)):
        st.garbled += 1  # a child's output landed inside the line: do not guess
        return
    st.progress_lines += 1
    for i, (done, rate) in enumerate(calcs):
        g = st.gpu(i)
        n = int(done)
        g.iterations = n
        if n < 0 or errs[i][1] == "(DIED!)":
            g.died = True
        try:
            r = float(rate)
        except ValueError:
            r = math.nan
        if math.isfinite(r) and n > 0:
            g.gflops = r
        e = int(errs[i][0])
        if e < 0:  # gpu_burn's 32-bit int wrapped: read it as unsigned, the least it can be
            g.overflowed = True
            e += 1 << 32
        g.errors_period = e
        if temps:
            t = _TEMP.match(temps[i])
            if t:
                v = float(t.group(1))
                g.temp_max = v if g.temp_max is None else max(g.temp_max, v)


def _end_period(st: _State) -> None:
    """A "Summary at:" line: gpu_burn zeroes its per-period error counters after it."""
    for g in st.gpus.values():
        g.errors_total += g.errors_period
        g.errors_period = 0


def parse(text: str) -> ParseResult:
    """Metrics gpu_burn.{ok,tflops,errors,temp_max,iterations} labelled {gpu} from gpu_burn output."""
    st = _State()
    tested: int | None = None
    in_verdict = False
    for seg in _segments(text):
        s = seg.strip()
        if "proc'd:" in s:
            _progress(s, st)
            continue
        if "Summary at:" in s:
            _end_period(st)
            continue
        listed = _LISTED.match(s)
        if listed and not in_verdict:
            g = st.gpu(int(listed.group(1)))
            g.name, g.uuid = listed.group(2), listed.group(3)
            continue
        t = _TESTED.search(s)
        if t:
            tested, in_verdict = int(t.group(1)), True
            continue
        v = _VERDICT.search(s) if in_verdict else None
        if v:
            st.gpu(int(v.group(1))).verdict = v.group(2)
    _end_period(st)
    return _result(text, st, tested)


def _dead(st: _State) -> dict[str, str]:
    """GPU -> why it failed the burn: its process died (proc'd -1) while another GPU did work. When
    every process died, gpu_burn itself or the environment failed: nothing is named."""
    worked = any((g.iterations or 0) > 0 and not g.died for g in st.gpus.values())
    return {str(i): "its gpu_burn process died during the burn (proc'd -1)"
            for i, g in sorted(st.gpus.items()) if g.died and worked}


def _result(text: str, st: _State, tested: int | None) -> ParseResult:
    problems: list[str] = []
    for rx, msg in _FATAL:
        m = rx.search(text)
        if m:
            problems.append(msg or f"gpu_burn: {m.group(0).strip()}")
    if not st.gpus:
        return invalid(KIND, *(problems or ["not gpu_burn output: no GPU listed, no progress, no verdict"]))
    if tested is None:
        problems.append("no final verdict (\"Tested N GPUs:\"): gpu_burn did not finish")
    else:
        judged = sorted(i for i, g in st.gpus.items() if g.verdict)
        if len(judged) != tested:
            problems.append(f"the verdict names {len(judged)} of the {tested} GPUs tested")
    metrics: list[Metric] = []
    for i, g in sorted(st.gpus.items()):
        did_work = (g.iterations or 0) > 0 and not g.died
        if g.verdict == "OK" and g.died:
            problems.append(f"GPU {i}: reported OK but its process died (proc'd -1)")
        elif g.verdict == "OK" and not did_work:
            problems.append(f"GPU {i}: reported OK but processed nothing"
                            + (" (no progress lines at all)" if not st.progress_lines else ""))
        elif g.died and g.verdict is None:
            problems.append(f"GPU {i}: its process died (proc'd -1)")
        ok = g.verdict == "OK" and did_work
        labels = {"gpu": i}
        metrics.append(Metric("gpu_burn.ok", 1.0 if ok else 0.0, COUNT, labels))
        if g.iterations is not None and not g.died:
            metrics.append(Metric("gpu_burn.iterations", float(max(g.iterations, 0)), COUNT, labels))
            metrics.append(Metric("gpu_burn.errors", float(g.errors_total), COUNT, labels))
        if g.gflops is not None:
            metrics.append(Metric("gpu_burn.tflops", g.gflops / 1000.0, TFLOPS, labels))
        if g.temp_max is not None:
            metrics.append(Metric("gpu_burn.temp_max", g.temp_max, CELSIUS, labels))
    details = {
        "tested": tested, "progress_lines": st.progress_lines, "garbled_lines": st.garbled,
        "faulty": [i for i, g in sorted(st.gpus.items()) if g.verdict == "FAULTY"],
        "dead": _dead(st),
        "error_counter_overflow": [i for i, g in sorted(st.gpus.items()) if g.overflowed],
        "gpus": {i: {"name": g.name, "uuid": g.uuid} for i, g in sorted(st.gpus.items()) if g.name},
    }
    return ParseResult(KIND, not problems, tuple(dict.fromkeys(problems)), tuple(metrics), details)
