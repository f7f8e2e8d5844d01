"""Can storage feed the GPUs? The pure half of the data_path check.

The worker's JSON lines become steps (one per worker count); the sweep's saturation point, the
input rate the GPUs need, the feed ratio (deliverable / required) and the verdict in words are
computed here, without touching the machine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.parsers.base import json_objects


@dataclass(frozen=True)
class Step:
    """One sweep step as the worker reported it."""

    workers: int
    bytes: int
    samples: int
    seconds: float
    complete: bool  # every file was read (else the step's time ran out first)
    errors: int = 0
    first_errors: tuple[str, ...] = ()

    @property
    def gbps(self) -> float:
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class WorkerOutput:
    """What one worker run printed: its start line, its result, its error lines."""

    start: Mapping[str, Any]
    step: Step | None
    generated: Mapping[str, Any]
    errors: tuple[str, ...]


def parse(text: str) -> WorkerOutput:
    """The worker's JSON lines (anything else is ignored)."""
    start: Mapping[str, Any] = {}
    generated: Mapping[str, Any] = {}
    step = None
    errors: list[str] = []
    for obj in json_objects(text):
        event = obj.get("event")
        if event == "start":
            start = obj
        elif event == "generated":
            generated = obj
        elif event == "error":
            errors.append(str(obj.get("message", "unknown error")))
        elif event == "result":
            try:
                step = Step(int(obj["workers"]), int(obj["bytes"]), int(obj["samples"]),
                            float(obj["seconds"]), bool(obj["complete"]), int(obj.get("errors", 0)),
                            tuple(str(e) for e in obj.get("first_errors", ())))
            except (KeyError, TypeError, ValueError) as e:
                errors.append(f"malformed result line: {e}")
    return WorkerOutput(start, step, generated, tuple(errors))


@dataclass(frozen=True)
class Saturation:
    """Fewest workers within `tolerance` of the best rate; `saturated` False while still rising."""

    workers: int
    gbps: float
    best_gbps: float
    saturated: bool | None  # None: a single step cannot tell


def saturation(steps: Sequence[Step], tolerance: float) -> Saturation:
    """Where throughput stops growing: the fewest workers reaching (1 - tolerance) x the best."""
    if not steps:
        raise ValueError("no steps")
    ordered = sorted(steps, key=lambda s: s.workers)
    best = max(s.gbps for s in ordered)
    first = next(s for s in ordered if s.gbps >= (1 - tolerance) * best)
    saturated = None if len(ordered) == 1 else first.workers < ordered[-1].workers
    return Saturation(first.workers, first.gbps, best, saturated)


@dataclass(frozen=True)
class Requirement:
    """The input rate the GPUs consume, GB/s, and how it was arrived at (in words)."""

    gbps: float
    how: str


def gpu_count(param: int | None, hardware: Mapping[str, Any],
              inventory: Mapping[str, Any]) -> tuple[int, str]:
    """GPUs to feed: the param, else the profile's count, else those found, else 1; with the source."""
    if param:
        return param, "param gpus"
    try:
        expected = int(((hardware or {}).get("gpu") or {}).get("count") or 0)
    except (TypeError, ValueError, AttributeError):
        expected = 0
    if expected:
        return expected, "profile hardware.gpu.count"
    found = len((inventory or {}).get("gpus") or [])
    if found:
        return found, "found"
    return 1, "none found, 1 assumed"


def requirement(*, required_gbps: float | None, per_gpu_gbps: float | None,
                per_gpu_samples_per_s: float | None, sample_bytes: float | None,
                gpus: tuple[int, str], profile_gpu_gbps: float | None) -> Requirement | None:
    """The required input rate: a node total, or per GPU x GPUs (from params, else the profile)."""
    n, source = gpus
    times = f"x {n} GPU{'s' if n != 1 else ''} ({source})"
    if required_gbps is not None:
        return Requirement(required_gbps, f"{required_gbps:g} GB/s for the node (param required_gbps)")
    if per_gpu_gbps is not None:
        return Requirement(per_gpu_gbps * n, f"{per_gpu_gbps:g} GB/s per GPU (param per_gpu_gbps) {times}")
    if per_gpu_samples_per_s is not None and sample_bytes:
        return Requirement(per_gpu_samples_per_s * sample_bytes * n / 1e9,
                           f"{per_gpu_samples_per_s:g} samples/s per GPU x {sample_bytes:,.0f} B per "
                           f"sample {times}")
    if profile_gpu_gbps is not None:
        return Requirement(profile_gpu_gbps * n,
                           f"{profile_gpu_gbps:g} GB/s per GPU (profile hardware.gpu_input_gbps) {times}")
    return None


def times(ratio: float) -> str:
    """A ratio as '2.3x', '0.6x', '12x', '0.0042x'; two decimals near 1 so 0.96 never reads 1.0x."""
    if 0.95 <= ratio < 1.05:
        return f"{ratio:.2f}x"
    if ratio < 0.1:
        return f"{ratio:.2g}x"
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:.0f}x"


def verdict(ratio: float) -> str:
    """The feed ratio in words."""
    if ratio >= 1:
        return f"storage can feed {times(ratio)} what the GPUs consume"
    return f"I/O-bound: feeds {times(ratio)} of what the GPUs consume"


def saturation_text(sat: Saturation, tried: Sequence[int]) -> str:
    if sat.saturated is None:
        return f"one worker count tried ({sat.workers}): saturation unknown"
    if not sat.saturated:
        return f"still rising at {max(tried)} workers (try more)"
    return f"saturates at {sat.workers} worker{'s' if sat.workers != 1 else ''} ({sat.gbps:.2f} GB/s)"


def summary(steps: Sequence[Step], sat: Saturation, need: Requirement | None, where: str) -> str:
    """One line: the verdict, the peak, the saturation point, and what was measured."""
    best = max(steps, key=lambda s: s.gbps)
    peak = (f"peak {best.gbps:.2f} GB/s, {best.samples_per_s:,.0f} samples/s at {best.workers} "
            f"worker{'s' if best.workers != 1 else ''}")
    sat_words = saturation_text(sat, [s.workers for s in steps])
    if need is None:
        return (f"{peak}; {sat_words}; no required input rate given (params required_gbps, "
                f"per_gpu_gbps or per_gpu_samples_per_s, or the profile's hardware.gpu_input_gbps), "
                f"so no feed ratio; {where}")
    ratio = best.gbps / need.gbps
    return (f"{verdict(ratio)} ({best.gbps:.2f} of {need.gbps:.2f} GB/s needed); {peak}; "
            f"{sat_words}; {where}")
