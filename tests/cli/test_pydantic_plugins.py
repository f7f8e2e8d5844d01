"""A pydantic plugin installed beside the harness (any distribution naming a `pydantic` entry
point) is not loaded by the console entry (cli.start): suites validate the same wherever the
harness is installed. An operator who sets PYDANTIC_DISABLE_PLUGINS decides for themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clihelp import ROOT, harness, write


def plugin_site(tmp_path: Path) -> tuple[Path, Path]:
    """A site directory holding a distribution whose pydantic plugin leaves a mark when loaded."""
    site, mark = tmp_path / "site", tmp_path / "loaded"
    dist = site / "nosy_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: nosy-plugin\nVersion: 1.0\n")
    write(dist / "entry_points.txt", "[pydantic]\nnosy = nosy_plugin:plugin\n")
    write(site / "nosy_plugin.py", f"from pathlib import Path\nPath({str(mark)!r}).write_text('x')\n"
                                   "class Plugin:\n"
                                   "    def new_schema_validator(self, *a, **k):\n"
                                   "        return None, None, None\n"
                                   "plugin = Plugin()\n")
    return site, mark


@pytest.mark.parametrize(("setting", "loaded"), [(None, False), ("", True), ("other", True)])
def test_a_plugin_beside_the_harness_is_not_loaded(tmp_path: Path, setting: str | None, loaded: bool):
    site, mark = plugin_site(tmp_path)
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    base = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if setting is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = setting
    res = harness("validate", str(ROOT / "suites" / "smoke.yaml"), env={**base, **env}, clear=True)
    assert res.returncode == 0, res.stderr
    assert mark.exists() is loaded, res.stderr
