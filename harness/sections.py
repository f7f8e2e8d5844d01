"""The sections a check's details may carry, each typed once.

A check's `details` is a mapping of section name to section. The sections below are the ones a
reader walks (the report draws them, history and fleet read them): a kind declares which it writes
(`CheckKind.sections`), writes them with these types, and results.json is validated against every
one of them on read (results.py). Keys not named here are the kind's own notes: shown as text in
the report's Details, never walked. Extra keys inside a section are allowed and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional, Union

from typing_extensions import TypedDict

STRICT = {"strict": True, "allow_inf_nan": False}  # pydantic config of every section
Label = Union[str, int]
Scalar = Union[str, int, float, bool, None]


class FileRef(TypedDict, total=False):
    """A file the check saved under the run directory (a series), relative to it."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    file: Optional[str]


# ---------------------------------------------------------------- config_audit

class Fact(TypedDict, total=False):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    name: str
    labels: Mapping[str, Label]
    value: Scalar
    source: str
    reason: Optional[str]


class AuditOutcome(TypedDict, total=False):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    fact: str
    labels: Mapping[str, Label]
    found: str
    expected: str
    outcome: str
    severity: str
    message: str
    note: str
    rule_source: str


class Audit(TypedDict, total=False):
    """`audit`: every fact read, and each config rule's outcome."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    facts: list[Fact]
    outcomes: list[AuditOutcome]


# ---------------------------------------------------------------- power_headroom

class Psu(TypedDict, total=False):
    """One row of `psus`: a PSU's state before and during the load, its peaks, its BMC status."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    psu: str
    before: Optional[bool]
    during: Optional[bool]
    peak_in_w: Optional[float]
    peak_out_w: Optional[float]
    capacity_w: Optional[float]
    status: Optional[str]


class Power(FileRef, total=False):
    """`power`: the saved node power series (raw/<check>/power.json) and how it was read."""

    samples: int
    period_s: float
    source: Optional[str]
    estimated: bool
    allowance_w: Optional[float]
    gpu_power: str
    capacity: str


# ---------------------------------------------------------------- telemetry (any kind, from the runner)

class Telemetry(FileRef, total=False):
    """`telemetry`: the GPU series sampled alongside the check (raw/<check>/telemetry.json)."""

    period_s: float
    samples: int
    gpus: int
    overruns: int
    sample_cost_ms: float
    error: str


# ---------------------------------------------------------------- settle (any kind, from the runner)

class SettleGpu(TypedDict, total=False):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    gpu: int
    temp: Optional[float]
    util: Optional[float]
    idle_temp: Optional[float]
    settled: bool
    why: str


class Settle(TypedDict, total=False):
    """`settle`: how long the runner waited for idle, cool GPUs before the check, or why it did not."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    skipped: str
    settled: bool
    reason: str
    waited_s: float
    timeout_s: float
    temp_margin_c: float
    max_util_pct: float
    gpus: list[SettleGpu]


# ---------------------------------------------------------------- contention (any kind, from the runner)

class ContentionLoad(TypedDict, total=False):
    """One reading of the competing load (harness/run/contention.py window()): shares 0-1, B/s."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    runnable_per_cpu: float
    steal: float
    psi_cpu_some: float
    psi_io_some: float
    psi_memory_some: float
    own_io_bps: float
    foreign_io_bps: float
    mem_available: float
    disks: list[str]
    processes: list[str]  # other processes with runnable threads, most first
    gpu_processes: list[str]  # 'GPU n: pid p (x GiB)'


class ContentionDuring(TypedDict, total=False):
    """The windows sampled while the check measured, the worst of each load, what contended."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    windows: int
    contended_windows: int
    worst: Mapping[str, float]
    contended: str
    gpu_processes: list[str]


class Contention(TypedDict, total=False):
    """`contention`: the competing load before the check (waited for, bounded) and during it,
    and the thresholds it was judged against."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    before: ContentionLoad
    waited_s: float
    window_s: float  # the last window read before the check: run/contention.FIRST_LOOK_S when calm
    timeout_s: float
    limits: Mapping[str, float]
    contended: list[str]  # what contended before the check, in words
    gated: bool  # False: recorded only ($HARNESS_CONTENTION=record)
    during: ContentionDuring


# ---------------------------------------------------------------- nvme_health

class Controller(TypedDict, total=False):
    """One of `controllers`: an NVMe controller read by nvme_health (the drive table walks them)."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    name: str
    model: Optional[str]
    serial: Optional[str]
    firmware: Optional[str]
    link: Optional[Mapping[str, Scalar]]


# ---------------------------------------------------------------- observe

class Process(TypedDict, total=False):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    pid: int
    comm: str
    what: str


class ObserveFinding(TypedDict, total=False):
    """One of `findings`: a resource that held the work back, with its evidence."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    resource: str
    share: float
    evidence: str
    devices: list[str]
    processes: list[Process]


# ---------------------------------------------------------------- all of them

class Details(TypedDict, total=False):
    """A check's details: the sections readers walk; any other key is the kind's own note."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    audit: Audit
    psus: list[Psu]
    power: Power
    notes: list[str]
    telemetry: Telemetry
    settle: Settle
    contention: Contention
    controllers: list[Controller]
    primary: str
    findings: list[ObserveFinding]
    series: FileRef


SECTIONS: frozenset[str] = frozenset(Details.__annotations__)  # every section's name
