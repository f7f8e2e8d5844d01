"""The Pushgateway edge: PUT a group of metrics (job `harness`, grouped by node) over HTTP."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from harness.errors import ToolError
from harness.model import join_labels

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

JOB = "harness"


class PushError(ToolError):
    """The Pushgateway could not be reached or refused the metrics."""


def redact(url: str) -> str:
    """`url` with the password of a `user:pass@` in it shown as '***' (what is printed, logged or
    raised about a Pushgateway)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def push(url: str, reg: CollectorRegistry, grouping: Mapping[str, str], job: str = JOB,
         timeout: float = 15.0) -> None:
    """Replace the group job/<grouping> on the Pushgateway at `url` with the registry's metrics;
    a `user:pass@` in `url` is sent as HTTP basic authentication, never shown."""
    # start-up: prometheus_client loads only to push
    from prometheus_client import push_to_gateway
    from prometheus_client.exposition import basic_auth_handler, default_handler

    parts = urlsplit(url)
    handler: Callable[..., Callable[[], None]] = default_handler
    target = url
    if parts.username is not None:
        user, password = unquote(parts.username), unquote(parts.password or "")
        target = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))

        def handler(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]],
                    data: bytes) -> Callable[[], None]:
            return basic_auth_handler(url, method, timeout, headers, data, user, password)
    try:
        push_to_gateway(target, job=job, registry=reg, grouping_key=dict(grouping), timeout=timeout,
                        handler=handler)
    except (OSError, ValueError) as e:
        where = join_labels(grouping)
        why = str(e)
        for secret in {parts.password, unquote(parts.password or "")} - {None, ""}:
            why = why.replace(str(secret), "***")
        raise PushError(f"push to {redact(url)} ({where}) failed: {why}", argv=("push", redact(url))) from e
