"""node-problem-detector's custom plugin contract, as its source states it (kubernetes/
node-problem-detector, pkg/custompluginmonitor/plugin/plugin.go and types/config.go), for tests:

- the plugin's stdout is read up to 4 KiB, spaces trimmed, then cut to max_output_length bytes
  (default 80); that is the condition's message;
- exit 0 is OK, 1 NonOK, any other code (or being killed at the timeout) Unknown;
- a config is valid when plugin is "custom", no rule's timeout exceeds the global one, every
  permanent rule's condition has a default condition, and every rule's path exists.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

OK, NONOK, UNKNOWN = "OK", "NonOK", "Unknown"
BUFFER = 4 * 1024
DEFAULTS = {"timeout": "5s", "invoke_interval": "30s", "max_output_length": 80}


def seconds(text: str) -> float:
    """A Go duration ('90s', '5m', '1m30s') in seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(a) * units[b] for a, b in parts)


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    cfg = {**DEFAULTS, **doc.get("pluginConfig", {})}
    doc["pluginConfig"] = cfg
    return doc


def problems(doc: Mapping[str, Any], exists: Any = os.path.exists) -> list[str]:
    """Why NPD would refuse the config (CustomPluginConfig.Validate), [] when it would not."""
    out = []
    if doc.get("plugin") != "custom":
        out.append(f"plugin {doc.get('plugin')!r} is not 'custom'")
    glob = seconds(doc["pluginConfig"]["timeout"])
    defaults = {c["type"] for c in doc.get("conditions", [])}
    for rule in doc.get("rules", []):
        if rule.get("timeout") and seconds(rule["timeout"]) > glob:
            out.append(f"rule {rule['reason']}: timeout above the global timeout")
        if rule.get("type") == "permanent" and rule.get("condition") not in defaults:
            out.append(f"permanent problem {rule.get('condition')} has no default condition")
        if not exists(rule["path"]):
            out.append(f"rule path {rule['path']} does not exist")
    return out


def invoke(doc: Mapping[str, Any], rule: Mapping[str, Any], argv: Sequence[str] | None = None,
           env: Mapping[str, str] | None = None) -> tuple[str, str, bytes]:
    """Run one rule as NPD's plugin.run does: (status, message, the plugin's raw stdout). `argv`
    replaces path + args (the test's own interpreter for the installed `harness`)."""
    cfg = doc["pluginConfig"]
    timeout = min(seconds(rule.get("timeout") or cfg["timeout"]), seconds(cfg["timeout"]))
    cmd = list(argv) if argv is not None else [rule["path"], *rule.get("args", [])]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return UNKNOWN, f"Timeout when running plugin {rule['path']!r}", b""
    output = r.stdout[:BUFFER].decode("utf-8", errors="replace").strip()
    output = output.encode("utf-8")[:int(cfg["max_output_length"])].decode("utf-8", errors="replace")
    return {0: OK, 1: NONOK}.get(r.returncode, UNKNOWN), output, r.stdout
