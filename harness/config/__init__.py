"""Suites and profiles: safe YAML loading, validation with FILE:LINE:COL problems, inheritance,
and JSON Schema export."""

from __future__ import annotations

from harness.config.loader import (
    LoadedProfile,
    LoadedSuite,
    ResolvedCheck,
    load_profile,
    load_suite,
    validate_paths,
)
from harness.config.paths import (
    Found,
    catalogue,
    find_profile,
    find_suite,
    list_profiles,
    list_suites,
    locate,
    untrusted_files,
    where_text,
)
from harness.config.schema import json_schema

__all__ = [
    "Found",
    "LoadedProfile",
    "LoadedSuite",
    "ResolvedCheck",
    "catalogue",
    "find_profile",
    "find_suite",
    "json_schema",
    "list_profiles",
    "list_suites",
    "load_profile",
    "load_suite",
    "locate",
    "untrusted_files",
    "validate_paths",
    "where_text",
]
