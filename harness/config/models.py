"""Pydantic models of suites and profiles. Unknown keys are errors everywhere."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from harness.catalog import METRICS
from harness.config.driftrules import DriftRule
from harness.config.factrule import FactRule
from harness.config.numbers import Bytes, Fraction, GBps, Quantity, Ratio, Seconds, convert_rule
from harness.series.psu import usable_psus
from harness.units import UNITS, check_finite, parse_fraction

Identifier = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
LabelValue = Union[str, int]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SiblingBand(Strict):
    """A bound from the median of a metric's siblings (the same labels but `vary`): exactly one of
    min_ratio (>= that x the median), max_ratio (<=), max_below (>= the median minus that, in the
    expectation's unit) or max_above (<= the median plus that)."""

    vary: list[str] = Field(default_factory=lambda: ["gpu"], min_length=1,
                            description="the labels that tell siblings apart (gpu; device; src, dst)")
    min_ratio: Optional[Fraction] = Field(None, gt=0, lt=1, description="0.95 or 95%: at least 95% of the "
                                          "median")
    max_ratio: Optional[Ratio] = Field(None, gt=1, lt=100, description="1.15 or 115%: at most 115% of "
                                       "the median")
    max_below: Optional[float] = Field(None, gt=0, description="at most this far below the median (unit)")
    max_above: Optional[float] = Field(None, gt=0, description="at most this far above the median (unit)")
    min_siblings: int = Field(3, ge=2, le=1024, description="smaller groups are not judged")

    @field_validator("min_ratio", "max_ratio", "max_below", "max_above")
    @classmethod
    def _finite(cls, v: Optional[float]) -> Optional[float]:
        return check_finite(v)

    @model_validator(mode="after")
    def _one_bound(self) -> SiblingBand:
        given = [k for k in ("min_ratio", "max_ratio", "max_below", "max_above")
                 if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of min_ratio, max_ratio, max_below, max_above"
                             + (f" (got {', '.join(given)})" if given else ""))
        return self


class Expectation(Strict):
    """One rule: a metric (with a label selector) against a reference band or absolute bounds, or
    against the median of its siblings (`sibling`)."""

    metric: str = Field(min_length=1, description="metric name, e.g. fio.bw")
    labels: dict[str, LabelValue] = Field(default_factory=dict, description="label selector")
    check: Optional[str] = Field(None, description="only metrics of this check id")
    reference: Quantity = Field(None, description="expected value ('900 MB/s' is converted)")
    lower: Quantity = Field(
        None, ge=0, description="allowed shortfall below reference, as a fraction (0.1) or a percent "
        "('10%'); absolute when reference is 0")
    upper: Quantity = Field(
        None, ge=0, description="allowed excess above reference, as a fraction (0.1) or a percent "
        "('10%'); absolute when reference is 0")
    min: Quantity = Field(None, description="absolute lower bound")
    max: Quantity = Field(None, description="absolute upper bound")
    unit: str = Field(description="unit of reference/min/max: the metric's, or a known multiple of it "
                      "(MB/s, ms, kW: converted on load)")
    reduce: Literal["each", "min", "max", "mean", "sum"] = "each"
    severity: Literal["fail", "warn"] = "fail"
    xfail: Optional[str] = Field(None, description="known issue: reason")
    note: Optional[str] = Field(None, description="where the number comes from")
    if_measured: bool = Field(
        False, description="judge only where a metric matches: for a rule on one variant (a dtype, a "
        "message size) that not every suite measures; otherwise nothing measured is an error")
    sibling: Optional[SiblingBand] = Field(
        None, description="judge each metric against the median of its siblings instead of fixed bounds")

    @model_validator(mode="before")
    @classmethod
    def _canonical_unit(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        spec = METRICS.get(data["metric"]) if isinstance(data.get("metric"), str) else None
        return convert_rule(data, spec.unit if spec else None)

    @field_validator("lower", "upper", mode="before")
    @classmethod
    def _fraction(cls, v: Any, info: ValidationInfo) -> Any:
        """Relative to a non-zero reference: 0.15 or '15%'; a bare 15 is refused (15% was meant)."""
        if v is None or info.data.get("reference") == 0 or "reference" not in info.data:
            return v
        return parse_fraction(v)

    @field_validator("reference", "lower", "upper", "min", "max")
    @classmethod
    def _finite(cls, v: Optional[float]) -> Optional[float]:
        return check_finite(v)

    @field_validator("unit")
    @classmethod
    def _known_unit(cls, v: str) -> str:
        if v not in UNITS:
            raise ValueError(f"unknown unit {v!r}; use one of {', '.join(sorted(UNITS))}")
        return v

    @model_validator(mode="after")
    def _has_bounds(self) -> Expectation:
        if self.sibling is not None:
            if any(v is not None for v in (self.reference, self.lower, self.upper, self.min, self.max)):
                raise ValueError("a sibling rule takes its bounds from the median: no reference, "
                                 "lower, upper, min or max")
            if self.reduce != "each":
                raise ValueError("a sibling rule judges each metric: no reduce")
            if self.xfail is not None:
                raise ValueError("a sibling rule cannot be a known issue (xfail): give the GPU's own rule")
            return self
        if self.reference is None and self.min is None and self.max is None:
            raise ValueError("give a reference (with lower/upper) or min/max")
        if self.reference is not None and self.lower is None and self.upper is None \
                and self.min is None and self.max is None:
            raise ValueError("reference without tolerance: give lower and/or upper, or min/max")
        if (self.lower is not None or self.upper is not None) and self.reference is None:
            raise ValueError("lower/upper are relative to a reference: give reference too")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


class Settle(Strict):
    """The settle gate before a check that measures: wait, bounded, until the GPUs are idle and
    near their idle temperature (harness/run/settle.py)."""

    enabled: Optional[bool] = Field(None, description="null: the kinds that measure settle (bandwidth, "
                                    "burn, NCCL); true/false: this check does or does not")
    timeout: Seconds = Field(300.0, description="longest wait; past it the check runs and the wait is noted")
    temp_margin: float = Field(5.0, gt=0, le=50, description="degrees C above the GPU's idle temperature "
                               "(the coolest it was seen idle in this run) that count as settled")
    max_util: float = Field(5.0, ge=0, le=100,
                            description="GPU utilisation % at or below which a GPU is idle")

    def over(self, base: Settle) -> Settle:
        """These settings where given, `base`'s (the suite's defaults) elsewhere."""
        return base.model_copy(update={k: getattr(self, k) for k in self.model_fields_set})


LIMIT_FIELDS = ("runnable_per_cpu", "steal", "cpu_some", "io_some", "mem_some", "mem_available",
                "foreign_io", "foreign_io_share")


class Contention(Strict):
    """The contention gate of a check that measures: competing load recorded before and during it;
    a measurement under contention waits (bounded) or is ERRORED (harness/run/contention.py)."""

    enabled: Optional[bool] = Field(None, description="null: every kind that loads the node is gated; "
                                    "true/false: this check is or is not")
    timeout: Seconds = Field(60.0, description="longest wait for the competing load to go before the "
                             "check; past it the check is ERRORED 'contended: ...'")
    # thresholds over harness.run.contention.LIMITS (null: the default there); shares as 0.2 or '20%'
    runnable_per_cpu: Optional[float] = Field(None, gt=0, le=10_000, description="other processes' "
                                              "runnable tasks per CPU that contend (default 3)")
    steal: Optional[Fraction] = Field(None, gt=0, le=1, description="share of CPU time stolen by the "
                                      "hypervisor that contends (default 20%)")
    cpu_some: Optional[Fraction] = Field(None, gt=0, le=1, description="PSI cpu `some` before the "
                                         "check that contends (default 90%)")
    io_some: Optional[Fraction] = Field(None, gt=0, le=1, description="PSI io `some` before a storage "
                                        "check that contends (default 50%)")
    mem_some: Optional[Fraction] = Field(None, gt=0, le=1, description="PSI memory `some` that "
                                         "contends (default 20%)")
    mem_available: Optional[Fraction] = Field(None, ge=0, le=1, description="MemAvailable / MemTotal "
                                              "below which memory contends (default 3%)")
    foreign_io: Optional[GBps] = Field(None, gt=0, description="other processes' disk I/O that "
                                       "contends, GB/s (or '50 MB/s'; default 0.05 GB/s)")
    foreign_io_share: Optional[Fraction] = Field(None, gt=0, le=1, description="during a storage "
                                                 "check, and at least this share of its own I/O "
                                                 "(default 25%)")

    def limits(self) -> dict[str, float]:
        """The thresholds given here (and in the suite's defaults), by harness.run.contention.Limits name."""
        out = {k: float(v) for k in LIMIT_FIELDS if (v := getattr(self, k)) is not None}
        if "foreign_io" in out:
            out["foreign_io_bps"] = out.pop("foreign_io") * 1e9
        return out

    def over(self, base: Contention) -> Contention:
        """These settings where given, `base`'s (the suite's defaults) elsewhere."""
        return base.model_copy(update={k: getattr(self, k) for k in self.model_fields_set})


class Defaults(Strict):
    timeout: Seconds = 1800.0
    repeat: int = Field(1, ge=1, le=1000)
    tags: list[str] = Field(default_factory=list)
    settle: Settle = Field(default_factory=Settle)  # type: ignore[arg-type]
    contention: Contention = Field(default_factory=Contention)  # type: ignore[arg-type]


class CheckSpec(Strict):
    """One check in a suite. `params` is validated against the kind's own model by the loader."""

    id: Identifier
    kind: str
    description: Optional[str] = None
    params: dict[str, Any] = Field(default_factory=dict)
    timeout: Optional[Seconds] = None
    repeat: Optional[int] = Field(None, ge=1, le=1000)
    tags: list[str] = Field(default_factory=list)
    needs: list[Literal["gpu", "root", "nvml", "network", "bmc"]] = Field(default_factory=list)
    destructive: bool = Field(False, description="suite half of the raw-device write opt-in")
    expect: list[Expectation] = Field(default_factory=list, description="suite-level expectations")
    settle: Optional[Settle] = Field(None, description="the settle gate's settings for this check")
    contention: Optional[Contention] = Field(None, description="the contention gate's settings for "
                                             "this check")


class Suite(Strict):
    name: Identifier
    description: str = ""
    tags: list[str] = Field(default_factory=list, description="suite-level tags; `acceptance` marks a "
                            "go-live suite: its first accepted run on a node is that node's go-live run")
    defaults: Defaults = Field(default_factory=Defaults)  # type: ignore[arg-type]
    checks: list[CheckSpec] = Field(min_length=1)
    drift: list[DriftRule] = Field(default_factory=list,
                                   description="change-over-time rules judged against the node's history")

    @model_validator(mode="after")
    def _unique_ids(self) -> Suite:
        seen: set[str] = set()
        for c in self.checks:
            if c.id in seen:
                raise ValueError(f"duplicate check id {c.id!r}")
            seen.add(c.id)
        return self


class GpuHardware(Strict):
    models: list[str] = Field(default_factory=list, description="NVML names that match, e.g. "
                              "'NVIDIA H100 80GB HBM3'")
    pci_device_ids: list[Annotated[str, Field(pattern=r"^0x[0-9a-f]{4}$")]] = Field(
        default_factory=list, description="PCI device ids (NVIDIA vendor 0x10de) that match, lower-case "
        "hex, e.g. '0x2330' for H100 SXM5 80GB: auto-selection by model even when NVML does not load")
    count: int = Field(0, ge=0, le=64)
    memory_min_bytes: Optional[Bytes] = Field(None, gt=0, description="each GPU's total memory as NVML "
                                              "reports it, at least (80000000000 or 74GiB for an 80 GB "
                                              "part)")
    nvlinks: Optional[int] = Field(None, ge=0, le=64, description="NVLink links up on each GPU, at least "
                                   "(H100/H200/B200 SXM: 18; a PCIe card without bridges: 0); unset, "
                                   "as many as the best GPU of the node")
    xid_critical: Optional[list[Annotated[int, Field(ge=1, le=999)]]] = Field(
        None, description="XID codes that fail their GPU in gpu_health: the site's policy (sites "
        "disagree); unset, the DCGM/AzNHC set 48 63 64 74 79 92 94 95 119 120; a suite's own "
        "xid_critical param wins")


class PsuHardware(Strict):
    count: int = Field(ge=1, le=32)
    rating_w: float = Field(gt=0)
    redundancy: str = Field("N+1", pattern=r"^(N\+N|N\+\d+|\d+\+\d+|none)$")
    max_system_power_w: Optional[float] = Field(None, gt=0)

    @model_validator(mode="after")
    def _policy_fits(self) -> PsuHardware:
        usable_psus(self.count, self.redundancy)  # ValueError: "4+2 redundancy does not fit 5 PSUs"
        return self


TOPO_PATH = r"^(PIX|PXB|PHB|NODE|SYS|NV\d+|NV#)$"


class GpuPairShape(Strict):
    """What every GPU pair of `nvidia-smi topo -m` must show."""

    nvlinks: Optional[int] = Field(None, ge=1, le=64, description="at least this many bonded NVLinks "
                                   "(NV18 -> 18)")
    path: Optional[list[Annotated[str, Field(pattern=TOPO_PATH)]]] = Field(
        None, min_length=1, description="allowed connections, e.g. [NV18]; NV# is any NVLink")


class GpuNicShape(Strict):
    """How close each GPU's nearest NIC must be."""

    max_path: Literal["PIX", "PXB", "PHB", "NODE", "SYS"] = Field(
        description="farthest allowed path to the nearest NIC (PXB: a NIC at PIX or PXB)")


class TopologyHardware(Strict):
    """The expected shape of the GPU/NIC topology (the `topology` check judges it)."""

    gpu_pairs: Optional[GpuPairShape] = None
    gpu_nic: Optional[GpuNicShape] = None
    gpu_numa: Optional[dict[Annotated[str, Field(pattern=r"^gpu\d+$")], int]] = Field(
        None, description="NUMA node of each GPU, e.g. {gpu0: 0, gpu4: 1}")


class Hardware(Strict):
    gpu: GpuHardware = Field(default_factory=GpuHardware)  # type: ignore[arg-type]
    topology: Optional[TopologyHardware] = None
    cpu_model: Optional[str] = None
    memory_min_bytes: Optional[Bytes] = Field(None, ge=0, description="installed memory, at least "
                                              "(bytes, or a size such as 16GiB)")
    nvme_count: Optional[int] = Field(None, ge=0)
    hca_count: Optional[int] = Field(None, ge=0, le=64, description="RDMA devices (mlx5_0, ...) in "
                                     "/sys/class/infiniband expected, at least")
    gpu_tdp_w: Optional[float] = Field(None, gt=0)
    gpu_input_gbps: Optional[float] = Field(
        None, gt=0, description="input data one GPU consumes while training, GB/s; the data_path "
        "check needs this x the GPU count (data_path.feed_ratio)")
    psu: Optional[PsuHardware] = None
    observe: dict[str, float] = Field(default_factory=dict, description="stall-doctor thresholds by name "
                                      "(harness.series.stall.Thresholds), e.g. {disk_util: 0.8}")


class Profile(Strict):
    name: Identifier
    description: str = ""
    extends: Optional[str] = Field(None, description="profile name or path this one overrides")
    sources: list[str] = Field(default_factory=list, description="where the numbers come from")
    hardware: Hardware = Field(default_factory=Hardware)  # type: ignore[arg-type]
    expectations: list[Expectation] = Field(default_factory=list)
    drift: list[DriftRule] = Field(default_factory=list,
                                   description="change-over-time rules judged against the node's history")
    config: list[FactRule] = Field(default_factory=list,
                                   description="software/configuration facts the config_audit check judges")
