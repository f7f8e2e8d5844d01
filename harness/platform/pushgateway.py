"""The Pushgateway edge: PUT a group of metrics (job `harness`, grouped by node) over HTTP."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from harness.errors import ToolError
from harness.model import join_labels

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

JOB = "harness"


class PushError(ToolError):
    """The Pushgateway could not be reached or refused the metrics."""


def push(url: str, reg: CollectorRegistry, grouping: Mapping[str, str], job: str = JOB,
         timeout: float = 15.0) -> None:
    """Replace the group job/<grouping> on the Pushgateway at `url` with the registry's metrics."""
    from prometheus_client import push_to_gateway  # start-up: prometheus_client loads only to push

    try:
        push_to_gateway(url, job=job, registry=reg, grouping_key=dict(grouping), timeout=timeout)
    except (OSError, ValueError) as e:
        where = join_labels(grouping)
        raise PushError(f"push to {url} ({where}) failed: {e}", argv=("push", url)) from e
