"""Pydantic validation errors turned into located, readable problems.

`Doc` holds one loaded file's data and Locator; `Doc.from_validation` maps each pydantic error
loc to FILE:LINE:COL (the key for unknown keys, the value for bad values) and words it for people.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Optional, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from harness.config.yamlload import Locator, PathKey
from harness.errors import ConfigProblem

_EXPECTED = {
    "int_parsing": "an integer", "int_type": "an integer", "int_from_float": "an integer",
    "float_parsing": "a number", "float_type": "a number", "finite_number": "a finite number",
    "string_type": "a string", "bool_parsing": "true or false", "bool_type": "true or false",
    "list_type": "a list", "tuple_type": "a list", "set_type": "a list", "dict_type": "a mapping",
    "model_type": "a mapping", "model_attributes_type": "a mapping", "none_required": "null",
}


def show(value: Any) -> str:
    """A short rendering of a YAML value for a message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _dotted(path: Sequence[Any]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _unwrap(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if get_origin(tp) in (Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        return models[0] if len(models) == 1 else (members[0] if len(members) == 1 else tp)
    return tp


def _model_at(model: type[BaseModel], loc: Sequence[Any]) -> Optional[type[BaseModel]]:
    """The model class that validates the mapping at `loc` below `model`, if one does."""
    tp: Any = model
    for item in loc:
        tp = _unwrap(tp)
        members = {getattr(m, "__name__", None): m for m in get_args(tp)}
        if get_origin(tp) in (Union, types.UnionType) and item in members:
            tp = members[item]  # pydantic names the union member it tried
            continue
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(item) if isinstance(item, str) else None
            if field is None:
                return None
            tp = field.annotation
            continue
        args = get_args(tp)
        origin = get_origin(tp)
        if origin in (list, tuple, set, frozenset) and isinstance(item, int) and args:
            tp = args[0]
        elif origin is dict and len(args) == 2:
            tp = args[1]
        else:
            return None
    tp = _unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or ''."""
    import difflib  # start-up: only when there is a problem to report

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _child(cur: Any, item: Any) -> tuple[bool, Any]:
    if isinstance(cur, dict) and isinstance(item, str) and item in cur:
        return True, cur[item]
    if isinstance(cur, list) and isinstance(item, int) and not isinstance(item, bool) \
            and 0 <= item < len(cur):
        return True, cur[item]
    return False, None


class Doc:
    """One loaded file: its data, locator and what its top level is called."""

    def __init__(self, data: Any, loc: Locator, top: str) -> None:
        self.data, self.loc, self.top = data, loc, top

    def get(self, path: PathKey) -> Any:
        """The value at `path`, or None when there is none."""
        cur = self.data
        for p in path:
            found, cur = _child(cur, p)
            if not found:
                return None
        return cur

    def where(self, path: PathKey) -> str:
        """Words for the place at `path`, e.g. "params.size of check 'fio-quick'"."""
        if len(path) >= 2 and path[0] == "checks" and isinstance(path[1], int):
            cid = self.get((*path[:2], "id"))
            head = f"check {cid!r}" if isinstance(cid, str) else f"check #{path[1] + 1}"
            rest = _dotted(path[2:])
            return f"{rest} of {head}" if rest else head
        return _dotted(path) or self.top

    def problem(self, path: PathKey, message: str, *, key: bool = False) -> ConfigProblem:
        return self.loc.problem(path, message, key=key)

    def _real_path(self, prefix: PathKey, rel: PathKey,
                   keep_last: bool) -> tuple[PathKey, Optional[tuple[PathKey, str]]]:
        """`prefix + rel` without the union-member tags pydantic puts in a loc, and the first
        such (union site, member tag) if there was one."""
        cur, out, union = self.get(prefix), list(prefix), None
        for i, item in enumerate(rel):
            found, child = _child(cur, item)
            if found:
                out.append(item)
                cur = child
            elif keep_last and i == len(rel) - 1:
                out.append(item)
            elif union is None:
                union = (tuple(out), str(item))
        return tuple(out), union

    def from_validation(self, err: ValidationError, model: type[BaseModel], prefix: PathKey,
                        skip: set[PathKey] | frozenset[PathKey] = frozenset()) -> list[ConfigProblem]:
        """Readable, located problems for every error pydantic found below `prefix`.

        Where a value matched no member of a union, only the closest member's errors are kept
        (the one with the fewest); a scalar that fits no member gets one combined message.
        """
        plain: list[tuple[ErrorDetails, PathKey]] = []
        sites: dict[PathKey, dict[str, list[tuple[ErrorDetails, PathKey]]]] = {}
        for e in err.errors(include_url=False):
            path, union = self._real_path(prefix, tuple(e["loc"]), keep_last=e["type"] == "missing")
            if path in skip:
                continue
            if union is None:
                plain.append((e, path))
            else:
                sites.setdefault(union[0], {}).setdefault(union[1], []).append((e, path))
        out: list[ConfigProblem] = []
        for site, members in sites.items():
            errs = [x for member in members.values() for x in member]
            if len(members) > 1 and all(path == site for _, path in errs):
                wanted = " or ".join(dict.fromkeys(_EXPECTED.get(e["type"], tag)
                                                   for tag, m in members.items() for e, _ in m))
                out.append(self.problem(site, f"{self.where(site)}: expected {wanted}, "
                                              f"got {show(errs[0][0]['input'])}"))
            else:
                plain += members[min(members, key=lambda tag: len(members[tag]))]
        for e, path in plain:
            rel = tuple(e["loc"])
            if e["type"] == "extra_forbidden":
                key = str(rel[-1])
                sub = _model_at(model, rel[:-1])
                hint = did_you_mean(key, sub.model_fields) if sub is not None else ""
                out.append(self.problem(path, f"unknown key {key!r} in {self.where(path[:-1])}{hint}",
                                        key=True))
            elif e["type"] == "missing":
                out.append(self.problem(path[:-1], f"missing required key {str(rel[-1])!r} in "
                                                   f"{self.where(path[:-1])}"))
            else:
                out.append(self.problem(path, f"{self.where(path)}: {_message(e)}"))
        return out


def _message(e: Mapping[str, Any]) -> str:
    kind, value, ctx = e["type"], e.get("input"), e.get("ctx") or {}
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {show(value)}"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""
        return f"expected one of {ctx.get('expected')}, got {show(value)}{hint}"
    if kind == "string_pattern_mismatch":
        if str(ctx.get("pattern", "")).startswith("^[A-Za-z0-9][A-Za-z0-9_.-]"):
            return (f"{show(value)} is not a valid name: use up to 64 letters, digits, '_', '.' "
                    "or '-', starting with a letter or digit")
        return f"{show(value)} does not match the pattern {ctx.get('pattern')}"
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    msg = str(e.get("msg", "invalid value")).replace("Input should be", "must be")
    if isinstance(value, (dict, list)):
        return msg
    return f"{msg}, got {show(value)}"
