"""The contract every check kind fulfils.

A kind has a pydantic params model, a catalogue of the metrics it can produce (with units
and which direction is better), `plan()` for --dry-run and `run()` which uses the context to
run tools and returns a CheckOutput. A check never renders and never judges:

- validity: `problems` says why the tool run cannot be trusted (a GPU missing from the output,
  no final verdict); any problem makes the check ERRORED and nothing is judged;
- metrics: what was measured, each with a unit and labels;
- rules: what the metrics must meet beyond the profile's and suite's expectations is declared,
  not applied: `KindHooks.own_rules(params)` gives compare.rules.Rule / siblings.SiblingRule objects
  (a `max_error_delta`, a sibling tolerance), and --dry-run lists the same list;
- findings: a verdict no rule can state (a FAULTY GPU in the tool's own words, a lost GPU, a PSU
  that dropped out under load, a config fact that differs) is a model.Finding in `findings`.

The runner hands all of it to compare.judge, the one place that builds Evaluations and the
check's status. No module under harness/checks calls compare.evaluate/judge or builds an
Evaluation (tests/checks/test_one_judge.py holds them to that).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.catalog import MetricSpec as MetricSpec  # re-exported: a kind's one import
from harness.config.kinds import Params as Params  # re-exported: a kind's one import
from harness.errors import ToolError, ToolTimeout
from harness.model import Finding, Metric, ToolRun
from harness.parsers.base import last_line as _last_line
from harness.platform import proc

if TYPE_CHECKING:
    from harness.compare.rules import OwnRule


@dataclass(frozen=True)
class PlannedCommand:
    """A command line a check will run, for --dry-run."""

    argv: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class CheckOutput:
    """What a check's run() returns. Non-empty `problems` means the tool run was not valid."""

    metrics: tuple[Metric, ...] = ()
    problems: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""
    # Verdicts no rule can state, as data; compare.judge turns them into evaluations.
    findings: tuple[Finding, ...] = ()


@dataclass
class CheckContext:
    """Everything a running check may use. Tools run only through `run_tool`."""

    check_id: str
    run_dir: Path
    timeout_s: float | None
    destructive: bool  # the suite's half of the raw-device opt-in
    allow_destructive: bool  # the command line's half
    inventory: Mapping[str, Any]
    log: logging.Logger
    tool_runs: list[ToolRun] = field(default_factory=list)
    progress: Callable[[str], None] = lambda _msg: None
    # The profile's `hardware` block (what the SKU should have, e.g. nvme_count), as a dict.
    hardware: Mapping[str, Any] = field(default_factory=dict)
    # The profile's `config:` rules (FactRule) with the profile's name, for config_audit.
    config: tuple[tuple[Any, str], ...] = ()

    @property
    def raw_dir(self) -> Path:
        return self.run_dir / "raw" / self.check_id

    def scratch_dir(self) -> Path:
        path = self.run_dir / "scratch" / self.check_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def run_tool(self, argv: Sequence[str], *, name: str | None = None,
                 timeout_s: float | None = None, env: Mapping[str, str] | None = None,
                 check_rc: bool = True) -> proc.ProcResult:
        """Run a tool, keep its raw output under raw/<check>/, record it, raise on failure.

        A timeout raises ToolTimeout; a non-zero exit raises ToolError when check_rc is set.
        """
        n = len(self.tool_runs) + 1
        stem = _safe(name or Path(str(argv[0])).name)
        out = self.raw_dir / f"{n:02d}-{stem}.stdout"
        err = self.raw_dir / f"{n:02d}-{stem}.stderr"
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        self.log.info("run: %s", " ".join(str(a) for a in argv))
        res = proc.run(argv, out, err, timeout, env=env)
        rel = self.run_dir
        self.tool_runs.append(ToolRun(res.argv, res.rc, res.duration_s, str(out.relative_to(rel)),
                                      str(err.relative_to(rel)), res.timed_out))
        cmd = " ".join(res.argv)
        if res.timed_out:
            raise ToolTimeout(f"{cmd}: timed out after {timeout:g} s; process group killed",
                              argv=res.argv, rc=res.rc, output_tail=res.tail())
        if res.overflowed:
            raise ToolError(f"{cmd}: printed more than {proc.MAX_RAW_BYTES >> 20} MiB; stopped, process "
                            f"group killed (what it printed is in {out.relative_to(rel).parent}/)",
                            argv=res.argv, rc=res.rc, output_tail=res.tail())
        if check_rc and res.rc != 0:
            how = f"killed by signal {-res.rc}" if res.rc is not None and res.rc < 0 else f"exit {res.rc}"
            tail = res.tail(600)
            raise ToolError(f"{cmd}: {how}" + (f": {_last_line(tail)}" if tail else ""),
                            argv=res.argv, rc=res.rc, output_tail=tail)
        return res


def cut_outputs(ctx: CheckContext) -> list[str]:
    """Problems for the tool outputs of a check that were larger than the tail a parser reads."""
    out = []
    for rel in (f for t in ctx.tool_runs for f in (t.stdout_file, t.stderr_file)):
        try:
            size = (ctx.run_dir / rel).stat().st_size
        except OSError:
            continue
        if size > proc.MAX_OUTPUT_BYTES:
            out.append(f"tool output cut: only the last {proc.MAX_OUTPUT_BYTES >> 20} MiB of {rel} "
                       f"({size} bytes) were parsed")
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:60] or "tool"




@dataclass(frozen=True)
class Need:
    """A tool or Python package a kind uses, for `harness list --tools`; one of a `group` is enough."""

    name: str  # the program on PATH, or the Python module
    hint: str  # how to install it
    python: bool = False
    use: str = ""  # when it is used ("engine: nvbandwidth"), empty when always
    group: str = ""  # needs sharing a group are alternatives (the burn engines)
    version_args: tuple[str, ...] = ("--version",)  # () for a tool that must not be run to ask


@dataclass(frozen=True)
class KindHooks:
    """What a kind may add to its run and plan, each with a default: the facts the runner,
    --dry-run and `harness list --tools` read, and the hooks they call."""

    needs: frozenset[str] = frozenset()
    # The tools and Python packages the kind runs or imports, with install hints (`harness list --tools`).
    requires: tuple[Need, ...] = ()
    # The sections of its details the kind writes (harness/sections.py names and types them; the
    # report draws them through report/views.py, by section, never by kind).
    sections: frozenset[str] = frozenset()
    # Whether the kind puts load on the node (burn, fio, traffic): a run with such a check takes
    # the node's run lock exclusively; read-only kinds (audit, inventory, health reads) share it.
    # A callable decides from the params (`command` takes `loads_node: false`).
    loads_node: bool | Callable[[Any], bool] = True
    # A kind that measures (bandwidth, a burn): the runner waits, bounded, until the GPUs are idle
    # and near their idle temperature before it starts (harness/run/settle.py).
    settle: bool = False
    # A kind whose number rides on each GPU's PCIe link (host copies, collectives): the telemetry
    # sampled while it measures judges the link (trained down while busy: FAILED, reported once,
    # harness.series.telemetry.findings), as under a burn (whose TelemetryParams turn it on).
    judges_pcie_link: bool = False
    # For kinds whose metric names come from params (e.g. `command`): name -> unit.
    declared_metrics: Callable[[Any], Mapping[str, MetricSpec]] | None = None
    # Expected duration in seconds for the progress display, when the kind can tell.
    estimate_s: Callable[[Any], float] | None = None
    # The rules the kind adds itself from its params (a max_error_delta, a sibling tolerance):
    # compare.judge applies exactly these and --dry-run lists them (compare.rules.describe_rule).
    own_rules: Callable[[Any], Sequence[OwnRule]] | None = None
    # Params with the profile's settings filled in where the suite left them unset (the profile's
    # hardware block as a dict); applied once when the plan is built, so run and --dry-run agree.
    profile_defaults: Callable[[Any, Mapping[str, Any]], Any] | None = None
    # The verdicts built into the kind (FAULTY GPUs, a failed DCGM test), as one line each for
    # --dry-run, given the params and the profile's hardware block.
    verdicts: Callable[[Any, Mapping[str, Any]], Sequence[str]] | None = None
    # The rules the kind judges itself from the profile's `config:` block (config_audit), as
    # --dry-run lines, given the params, the profile's name and those rules.
    config_plan: Callable[[Any, str, Sequence[Any]], Sequence[str]] | None = None


@dataclass(frozen=True)
class CheckKind:
    """A check kind, as listed in the registry: what it is, its params and metrics, how it runs and
    plans, and its hooks (KindHooks)."""

    name: str
    description: str
    params: type[Params]
    metrics: Mapping[str, MetricSpec]
    run: Callable[[Any, CheckContext], CheckOutput]
    plan: Callable[[Any, Mapping[str, Any]], Sequence[PlannedCommand]]
    hooks: KindHooks = KindHooks()

    @property
    def needs(self) -> frozenset[str]:
        return self.hooks.needs

    @property
    def requires(self) -> tuple[Need, ...]:
        return self.hooks.requires

    @property
    def sections(self) -> frozenset[str]:
        return self.hooks.sections

    @property
    def settle(self) -> bool:
        return self.hooks.settle

    @property
    def judges_pcie_link(self) -> bool:
        return self.hooks.judges_pcie_link

    @property
    def declares_metrics(self) -> bool:
        """Whether the kind's metric names come from its params (`command`)."""
        return self.hooks.declared_metrics is not None

    def loads(self, params: Any) -> bool:
        """True when a check of this kind with these params loads the node."""
        loads = self.hooks.loads_node
        return loads(params) if callable(loads) else loads

    def with_profile(self, params: Any, hardware: Mapping[str, Any]) -> Any:
        """`params` completed from the profile (unchanged when the kind takes nothing from it)."""
        fill = self.hooks.profile_defaults
        return fill(params, hardware) if fill is not None else params

    def rules_of(self, params: Any) -> Sequence[OwnRule]:
        """The kind's own rules for these params (none when it has no own_rules)."""
        own = self.hooks.own_rules
        return own(params) if own is not None else ()

    def metric_specs(self, params: Any) -> Mapping[str, MetricSpec]:
        declared = self.hooks.declared_metrics
        if declared is not None:
            return {**self.metrics, **declared(params)}
        return self.metrics

    def __repr__(self) -> str:
        return f"CheckKind({self.name!r})"
