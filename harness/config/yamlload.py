"""Safe YAML loading that remembers where every key and value came from.

The document is composed into nodes by PyYAML's safe loader and turned into plain Python
objects here, so that every problem can be reported as FILE:LINE:COL. Only the plain YAML
tags are accepted (no `!!python/...`, no custom tags); duplicate keys, non-string keys,
alias bombs, deep nesting and multi-document files are refused.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.composer import Composer
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from harness.errors import ConfigError, ConfigProblem

CParser: Any
try:  # libyaml's scanner and parser, when PyYAML was built with it
    from yaml import _yaml
    CParser = _yaml.CParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    CParser = None

MAX_BYTES = 4 * 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 100

_T = "tag:yaml.org,2002:"
_STR, _MAP, _SEQ, _MERGE = _T + "str", _T + "map", _T + "seq", _T + "merge"
_SCALAR_TAGS = {_T + t for t in ("null", "bool", "int", "float")}

PathKey = tuple[Any, ...]


class Locator:
    """Maps a path of keys and indices to a 1-based (line, col) in one file."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._values: dict[PathKey, tuple[int, int]] = {}
        self._keys: dict[PathKey, tuple[int, int]] = {}

    def _set(self, path: PathKey, value: Node, key: Node | None = None) -> None:
        self._values.setdefault(path, _pos(value))
        if key is not None:
            self._keys.setdefault(path, _pos(key))

    def __contains__(self, path: object) -> bool:
        return path in self._values

    def locate(self, path: PathKey, *, key: bool = False) -> tuple[int, int]:
        """Where `path` is: its key (key=True) or its value, else its nearest existing parent."""
        path = tuple(path)
        if key and path in self._keys:
            return self._keys[path]
        for n in range(len(path), -1, -1):
            pos = self._values.get(path[:n])
            if pos is not None:
                return pos
        return (1, 1)

    def existing(self, path: PathKey) -> PathKey:
        """The longest prefix of `path` that exists in the document."""
        path = tuple(path)
        for n in range(len(path), -1, -1):
            if path[:n] in self._values:
                return path[:n]
        return ()

    def problem(self, path: PathKey, message: str, *, key: bool = False) -> ConfigProblem:
        """A ConfigProblem located at `path` in this file."""
        line, col = self.locate(path, key=key)
        return ConfigProblem(self.file, line, col, message)


def _pos(node: Node) -> tuple[int, int]:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


class _Refused(Exception):
    """Internal: stop loading with one located message."""

    def __init__(self, line: int, col: int, message: str) -> None:
        super().__init__(message)
        self.line, self.col, self.message = line, col, message


def _refuse(node: Node | Any, message: str) -> NoReturn:
    mark = node.start_mark
    raise _Refused(mark.line + 1, mark.column + 1, message)


def _bounded_compose(loader: Any, parent: Node | None, index: Any) -> Node | None:
    """PyYAML's compose_node, refusing a document nested deeper than MAX_DEPTH or with more
    than MAX_NODES nodes as it goes."""
    loader._depth += 1
    loader._composed += 1
    try:
        if loader._depth > MAX_DEPTH:
            _refuse(loader.peek_event(), f"document is nested deeper than {MAX_DEPTH} levels")
        if loader._composed > MAX_NODES:
            _refuse(loader.peek_event(), f"document has more than {MAX_NODES} nodes")
        return Composer.compose_node(loader, parent, index)
    finally:
        loader._depth -= 1


class _Loader(yaml.SafeLoader):
    """SafeLoader whose composer bounds nesting depth and node count as it goes."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._composed = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        return _bounded_compose(self, parent, index)


if CParser is not None:
    class _FastLoader(CParser, Composer, yaml.constructor.SafeConstructor, Resolver):  # type: ignore[misc]
        """libyaml's scanner and parser under the same bounded Python composer, resolver and
        safe constructor as _Loader: the same nodes and marks, about 4x faster. It is used
        for documents that load; one that does not is read again by _Loader, whose messages
        are the ones reported."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._depth = 0
            self._composed = 0

        get_single_node = Composer.get_single_node
        compose_node = _bounded_compose


class _Builder:
    """Turns a node tree into dicts, lists and scalars, filling a Locator on the way."""

    def __init__(self, loader: Any, locator: Locator) -> None:
        self.loader = loader
        self.loc = locator
        self.count = 0
        self.aliased = False
        self.stack: set[int] = set()
        self.seen: set[int] = set()

    def build(self, node: Node, path: PathKey, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            hint = " (YAML alias bomb?)" if self.aliased else ""
            _refuse(node, f"document expands to too many nodes{hint}")
        if depth > MAX_DEPTH:
            _refuse(node, f"document is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if id(node) in self.stack:
            _refuse(node, "recursive alias: a node contains itself")
        self.stack.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                if node.tag != _SEQ:
                    _refuse(node, f"unsupported YAML tag {_short(node.tag)!r}")
                out = []
                for i, item in enumerate(node.value):
                    self._note(item)
                    self.loc._set((*path, i), item)
                    out.append(self.build(item, (*path, i), depth + 1))
                return out
            if isinstance(node, MappingNode):
                return self._mapping(node, path, depth)
            _refuse(node, f"unsupported YAML node {type(node).__name__}")
        finally:
            self.stack.discard(id(node))

    def _note(self, node: Node) -> None:
        if id(node) in self.seen:
            self.aliased = True
        self.seen.add(id(node))

    def _mapping(self, node: MappingNode, path: PathKey, depth: int) -> dict[str, Any]:
        if node.tag != _MAP:
            _refuse(node, f"unsupported YAML tag {_short(node.tag)!r}")
        out: dict[str, Any] = {}
        first: dict[str, Node] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merges.append(value_node)
                continue
            key = self._key(key_node)
            if key in first:
                _refuse(key_node, f"duplicate key {key!r} (first at line "
                                  f"{first[key].start_mark.line + 1})")
            first[key] = key_node
            self._note(value_node)
            self.loc._set((*path, key), value_node, key_node)
            out[key] = self.build(value_node, (*path, key), depth + 1)
        for merge in merges:
            for key_node, value_node in self._merge_sources(merge):
                key = self._key(key_node)
                if key in out:
                    continue
                self._note(value_node)
                self.loc._set((*path, key), value_node, key_node)
                out[key] = self.build(value_node, (*path, key), depth + 1)
        return out

    def _merge_sources(self, node: Node) -> Iterator[tuple[Node, Node]]:
        self.aliased = True
        sources = node.value if isinstance(node, SequenceNode) else [node]
        for src in sources:
            if not isinstance(src, MappingNode) or src.tag != _MAP:
                _refuse(src, "a merge key '<<' takes a mapping or a list of mappings")
            for key_node, value_node in src.value:
                self.count += 1
                if self.count > MAX_NODES:
                    _refuse(src, "document expands to too many nodes (YAML alias bomb?)")
                if key_node.tag == _MERGE:
                    yield from self._merge_sources(value_node)
                else:
                    yield key_node, value_node

    def _key(self, node: Node) -> str:
        if isinstance(node, ScalarNode) and node.tag == _STR:
            return str(node.value)
        if isinstance(node, ScalarNode):
            _refuse(node, f"key {node.value!r} is not a string (YAML reads it as "
                          f"{_short(node.tag)}); quote it")
        _refuse(node, "keys must be plain strings, not lists or mappings")

    def _scalar(self, node: ScalarNode) -> Any:
        if node.tag == _STR and not node.style:  # plain: None from PyYAML, "" from libyaml
            return _yaml12_number(node.value)
        if node.tag == _STR or node.tag == _T + "timestamp":
            return str(node.value)
        if node.tag not in _SCALAR_TAGS:
            _refuse(node, f"unsupported YAML tag {_short(node.tag)!r}")
        differs = _yaml11_only(node)
        if differs:
            _refuse(node, differs)
        try:
            return self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError, yaml.YAMLError):
            _refuse(node, f"cannot read {node.value[:40]!r} as {_short(node.tag)} (too large?)")


_YAML12_BOOL = {"true", "True", "TRUE", "false", "False", "FALSE"}
_YAML12_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_YAML12_OCTAL = re.compile(r"0o[0-7]+")


def _yaml11_only(node: ScalarNode) -> str | None:
    """Why a bool/int/float scalar reads differently in YAML 1.2 (which suites are written in)
    than in YAML 1.1 (what PyYAML and older tools read), or None when both agree."""
    text = str(node.value)
    if node.tag == _T + "bool" and text not in _YAML12_BOOL:
        as11 = "true" if text.lower() in ("yes", "on", "y") else "false"
        return (f"{text!r} is the string {text!r} in YAML 1.2 but {as11} in YAML 1.1; write "
                f"'{text}' in quotes for the text or {as11} for the boolean")
    if node.tag not in (_T + "int", _T + "float"):
        return None
    digits = text.lstrip("+-")
    if "_" in digits or ":" in digits or digits[:2] in ("0b", "0B"):
        return (f"{text!r} is a string in YAML 1.2 but a number in YAML 1.1; write the number "
                f"plainly (no '_' or ':') or quote the text")
    if node.tag == _T + "int" and len(digits) > 1 and digits[0] == "0" and digits.isdigit():
        as11 = f"octal {int(digits, 8)}" if set(digits) <= set("01234567") else "not a number"
        return (f"{text!r} is {int(digits)} in YAML 1.2 but {as11} in YAML 1.1; write {int(digits)}, "
                f"0o{digits.lstrip('0') or '0'} for octal, or quote it for the text")
    return None


def _yaml12_number(text: str) -> Any:
    """A plain scalar YAML 1.1 left a string but YAML 1.2 reads as a number ('1e3', '0o17')."""
    if _YAML12_FLOAT.fullmatch(text) and any(c in text for c in ".eE"):
        value = float(text)
        return value if math.isfinite(value) else text
    if _YAML12_OCTAL.fullmatch(text):
        return int(text[2:], 8)
    return text


def _short(tag: str) -> str:
    return "!!" + tag[len(_T):] if tag.startswith(_T) else tag


def read_text(path: Path) -> str:
    """The file's text; ConfigError (at 1:1 or at the bad byte) when it cannot be read."""
    name = str(path)
    try:
        if path.is_dir():
            raise ConfigError([ConfigProblem(name, 1, 1, "is a directory, not a YAML file")])
        if path.exists() and not path.is_file():
            raise ConfigError([ConfigProblem(name, 1, 1, "is not a regular file")])
        with path.open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError([ConfigProblem(name, 1, 1, "no such file")]) from None
    except OSError as e:
        raise ConfigError([ConfigProblem(name, 1, 1, f"cannot read: {e.strerror or e}")]) from e
    if len(data) > MAX_BYTES:
        raise ConfigError([ConfigProblem(name, 1, 1, f"file is larger than {MAX_BYTES} bytes")])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ConfigError([ConfigProblem(name, line, col, f"not valid UTF-8 (byte "
                                                          f"0x{data[e.start]:02x})")]) from None


def load_yaml(path: Path) -> tuple[Any, Locator]:
    """Load one YAML document safely; returns the plain data and its Locator.

    Raises ConfigError for an unreadable file and for every YAML problem listed in the module
    docstring.
    """
    return parse_yaml(read_text(path), str(path))


def parse_yaml(text: str, file: str) -> tuple[Any, Locator]:
    """Like load_yaml, for text already read; `file` names it in problems."""
    if CParser is not None:
        with contextlib.suppress(Exception):  # read again below, for the pure loader's message
            return _parse(text, file, _FastLoader)
    return _parse(text, file, _Loader)


def _parse(text: str, file: str, make: Callable[[str], Any]) -> tuple[Any, Locator]:
    locator = Locator(file)
    loader: Any = None
    try:
        loader = make(text)
        node = loader.get_single_node()
        if node is None:
            raise _Refused(1, 1, "file is empty (no YAML document)")
        builder = _Builder(loader, locator)
        locator._set((), node)
        return builder.build(node, (), 1), locator
    except _Refused as e:
        raise ConfigError([ConfigProblem(file, e.line, e.col, e.message)]) from None
    except yaml.MarkedYAMLError as e:
        raise ConfigError([_yaml_problem(file, e)]) from None
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        col = e.position - (text.rfind("\n", 0, e.position) + 1) + 1
        raise ConfigError([ConfigProblem(file, line, col, f"YAML error: {e.reason} "
                                                          f"(character #x{e.character:04x})")]) from None
    except yaml.YAMLError as e:
        raise ConfigError([ConfigProblem(file, 1, 1, f"YAML error: {e}")]) from None
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_problem(file: str, e: yaml.MarkedYAMLError) -> ConfigProblem:
    mark = e.problem_mark or e.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    problem = (e.problem or "").strip()
    if problem == "but found another document":
        return ConfigProblem(file, line, col, "more than one YAML document in the file (remove '---')")
    context = (e.context or "").strip()
    text = problem or context or "invalid YAML"
    if context and problem:
        where = e.context_mark
        at = f" at line {where.line + 1}" if where is not None and where.line + 1 != line else ""
        text = f"{problem} ({context}{at})"
    return ConfigProblem(file, line, col, f"YAML syntax error: {text}")
