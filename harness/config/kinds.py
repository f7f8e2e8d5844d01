"""What config needs from a check kind, as a Protocol: config never imports the check kinds.

The caller (run, cli, fleet) hands config the registry's kinds; config validates each check's
params with the kind's model and its expectations against the kind's metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from harness.catalog import MetricSpec


class Params(BaseModel):
    """Base of every kind's params: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class KindSpec(Protocol):
    """A check kind as config sees it (harness.checks.base.CheckKind is one)."""

    @property
    def description(self) -> str: ...

    @property
    def params(self) -> type[Params]: ...

    @property
    def metrics(self) -> Mapping[str, MetricSpec]: ...

    @property
    def declares_metrics(self) -> bool:
        """Whether the kind's metric names come from its params (`command`)."""
        ...

    def metric_specs(self, params: Any) -> Mapping[str, MetricSpec]:
        """The kind's metrics plus those these params declare."""
        ...
