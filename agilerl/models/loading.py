"""Read manifest files (YAML or JSON) and remember where every key is written.

YAML goes through a safe YAML loader (libyaml's when available); a ``.json`` file is parsed
as strict JSON (trailing commas, comments, ``NaN`` refused at ``line:col``), then its key
positions are read with the YAML composer (JSON is YAML). Besides the plain data, the
loader returns a map from each key's path to its file position so that errors can point at
``file:line:col``. Syntax errors, empty files, documents that are not a mapping, and
duplicate keys are reported as :class:`ManifestError` naming the file and line.

Reading is bounded, so a hostile file costs milliseconds, never the machine: files larger
than :data:`MAX_MANIFEST_BYTES` are refused before parsing, and a document that YAML
aliases expand beyond :data:`MAX_VALUES` values, :data:`MAX_EXPANDED_CHARS` characters of
text or :data:`MAX_DEPTH` levels (a "billion laughs" file), or an alias inside its own
anchor, is refused before anything is built.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import yaml

from agilerl.core.manifest_errors import Location, ManifestError, ManifestIssue

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonScalar, JsonValue

PathKey = tuple[object, ...]
"""Keys and list indices from the document's root (only compared, hashed and printed)."""

MAX_MANIFEST_BYTES = 1 << 20
"""Largest manifest file read (1 MiB; real manifests are a few KB)."""
MAX_VALUES = 100_000
"""Most values (mappings, lists, scalars) a document may hold once aliases are expanded."""
MAX_DEPTH = 100
"""Deepest nesting of mappings and lists a document may have once aliases are expanded."""
MAX_EXPANDED_CHARS = 4 * MAX_MANIFEST_BYTES
"""Most characters of text (scalars and keys) a document may hold once aliases are
expanded: a few aliases of one long string are few values, yet gigabytes once dumped."""

_BaseLoader: type[yaml.CSafeLoader] | type[yaml.SafeLoader] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """Safe loader (libyaml when available) that also reads ``1e-4`` as a number.

    YAML 1.1 only treats exponent floats with a dot as numbers (``1.0e-4``), so ``1e-4``
    would be the string "1e-4"; YAML 1.2 and JSON read it as a float, and so do we.
    """

    yaml_implicit_resolvers = {k: list(v) for k, v in _BaseLoader.yaml_implicit_resolvers.items()}


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@dataclass
class LocatedDocument:
    """A parsed manifest plus the position of each key (paths are tuples of keys/indices)."""

    data: object
    """The document: parsed JSON/YAML values, or a mapping given from Python (whose values
    may be spec objects or callables). The parsers refuse a document that is not a mapping."""
    file: str | None = None
    positions: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    duplicates: list[tuple[PathKey, int, int]] = field(default_factory=list)

    @property
    def base_dir(self) -> Path | None:
        """Folder the manifest lives in (relative file references start there)."""
        return Path(self.file).resolve().parent if self.file else None

    def locate(self, path: PathKey) -> Location | None:
        """Position of the deepest written prefix of ``path`` (a missing key points at its parent)."""
        if self.file is None and not self.positions:
            return None
        for end in range(len(path), 0, -1):
            hit = self.positions.get(tuple(path[:end]))
            if hit is not None:
                return Location(self.file, hit[0], hit[1])
        return Location(self.file, 1, 1) if self.file else None


def _walk(node: yaml.Node, prefix: PathKey, loader: _Loader, doc: LocatedDocument) -> None:
    """Record positions of mapping keys and sequence items below ``node``."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[JsonScalar, tuple[int, int]] = {}
        for key_node, value_node in node.value:
            key = _scalar_key(key_node, loader)
            mark = key_node.start_mark
            pos = (mark.line + 1, mark.column + 1)
            path = (*prefix, key)
            if key in seen and key != "<<":
                doc.duplicates.append((path, seen[key][0], pos[0]))
            seen[key] = pos
            doc.positions[path] = pos
            _walk(value_node, path, loader, doc)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            mark = item.start_mark
            doc.positions[(*prefix, index)] = (mark.line + 1, mark.column + 1)
            _walk(item, (*prefix, index), loader, doc)


def _scalar_key(node: yaml.Node, loader: _Loader) -> JsonScalar:
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_object(node)
        return value if isinstance(value, str | int | float | bool) or value is None else str(value)
    return f"<{getattr(node, 'id', 'node')}>"


def parse_text(text: str, file: str | None = None, *, json_text: bool | None = None) -> LocatedDocument:
    """Parse YAML/JSON text into a :class:`LocatedDocument` (raises :class:`ManifestError`).

    ``json_text`` parses strict JSON (default: when ``file`` ends in ``.json``).
    """
    _check_size(len(text.encode("utf-8", "surrogatepass")), file)
    if json_text is None:
        json_text = bool(file) and str(file).lower().endswith(".json")
    if json_text:
        return _parse_json(text, file)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node, file)
        data = loader.construct_document(node) if node is not None else None
        doc = LocatedDocument(data=data, file=file)
        if node is not None:
            _walk(node, (), loader, doc)
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, file) from None
    except yaml.YAMLError as exc:
        raise ManifestError(
            [ManifestIssue("", f"not valid YAML/JSON: {exc}", Location(file, 1, 1), kind="syntax")],
            source=file,
        ) from None
    finally:
        loader.dispose()
    _check_document(doc, node)
    return doc


def parse_value(text: str) -> JsonValue:
    """One YAML value (a command-line override), read exactly as in a manifest file: the
    same number rules (``3e-4`` is a float), bounded aliases. Raises ``yaml.YAMLError`` for
    bad syntax and :class:`ManifestError` for an alias bomb."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, None)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_size(size: int, file: str | None) -> None:
    if size > MAX_MANIFEST_BYTES:
        raise ManifestError(
            [ManifestIssue("", f"the file is {size:,} bytes; manifests larger than "
                           f"{MAX_MANIFEST_BYTES:,} bytes (1 MiB) are refused unread",
                           Location(file, 1, 1) if file else None, kind="file")],
            source=file,
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node, file: str | None) -> None:
    """Refuse a node graph whose alias expansion is cyclic, too large or too deep.

    Aliases make the composed graph share nodes; everything after parsing (positions,
    validation, copies, dumps) walks the expanded tree, so the expanded size is what is
    bounded: values, characters of text and depth. One depth-first pass with memoised
    sizes: linear in the graph.
    """
    size: dict[int, tuple[int, int, int]] = {}  # id -> (values, characters, height)
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        key = id(node)
        if leaving:
            kids = [size[id(k)] for k in _children(node)]
            own = len(node.value) if isinstance(node, yaml.ScalarNode) else 0
            values = 1 + sum(k[0] for k in kids)
            chars = own + sum(k[1] for k in kids)
            height = 1 + max((k[2] for k in kids), default=0)
            size[key] = (values, chars, height)
            open_nodes.discard(key)
            if values > MAX_VALUES or chars > MAX_EXPANDED_CHARS or height > MAX_DEPTH:
                raise _expansion_error(node, file, size[key])
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise _alias_error(node, "an alias refers to a mapping or list that contains "
                               "the alias itself (a document cannot contain itself)", file)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node))


def _expansion_error(node: yaml.Node, file: str | None,
                     measured: tuple[int, int, int]) -> ManifestError:
    values, chars, _ = measured
    if values > MAX_VALUES:
        what = f"more than {MAX_VALUES:,} values"
    elif chars > MAX_EXPANDED_CHARS:
        what = f"more than {MAX_EXPANDED_CHARS:,} characters of text"
    else:
        what = f"more than {MAX_DEPTH} levels of nesting"
    return _alias_error(node, f"this value expands to {what} (YAML aliases repeat their "
                        "anchor's whole content); a manifest needs far fewer", file)


def _alias_error(node: yaml.Node, message: str, file: str | None) -> ManifestError:
    mark = node.start_mark
    where = Location(file, mark.line + 1, mark.column + 1)
    return ManifestError([ManifestIssue("", message, where, kind="syntax")], source=file)


class _NotJsonNumber(ValueError):
    pass


def _refuse_constant(name: str) -> NoReturn:
    raise _NotJsonNumber(name)


def _parse_json(text: str, file: str | None) -> LocatedDocument:
    """Strict JSON for the data; the YAML composer (JSON is YAML) for key positions."""
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise ManifestError([ManifestIssue("", f"not valid JSON: {exc.msg}",
                                           Location(file, exc.lineno, exc.colno), kind="syntax")],
                            source=file) from None
    except _NotJsonNumber as exc:
        raise ManifestError([ManifestIssue("", f"not valid JSON: {exc} is not a JSON number",
                                           _token_location(text, str(exc), file), kind="syntax")],
                            source=file) from None
    except RecursionError:
        raise ManifestError([ManifestIssue("", "not valid JSON: nested too deeply",
                                           Location(file, 1, 1), kind="syntax")],
                            source=file) from None
    doc = LocatedDocument(data=data, file=file)
    loader = _Loader(text)
    node = None
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node, file)
            _walk(node, (), loader, doc)
    except yaml.YAMLError:
        doc.positions.clear()  # valid JSON that libyaml reads differently: no positions
        doc.duplicates.clear()
    finally:
        loader.dispose()
    _check_document(doc, node)
    return doc


def _token_location(text: str, token: str, file: str | None) -> Location:
    match = re.search(r"[:,\[]\s*(" + re.escape(token) + r")", text)
    if match is None:
        return Location(file, 1, 1)
    offset = match.start(1)
    line = text.count("\n", 0, offset) + 1
    return Location(file, line, offset - (text.rfind("\n", 0, offset) + 1) + 1)


def _syntax_error(exc: yaml.MarkedYAMLError, file: str | None) -> ManifestError:
    mark = exc.problem_mark or exc.context_mark
    where = Location(file, mark.line + 1, mark.column + 1) if mark else Location(file, 1, 1)
    context = exc.context
    if context and exc.context_mark is not None and exc.context_mark is not mark:
        context += f" (started at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1})"
    parts = [part for part in (context, exc.problem) if part]
    message = "not valid YAML/JSON: " + ("; ".join(parts) if parts else str(exc))
    return ManifestError([ManifestIssue("", message, where, kind="syntax")], source=file)


def _check_document(doc: LocatedDocument, node: yaml.Node | None) -> None:
    file = doc.file
    if doc.data is None:
        raise ManifestError(
            [ManifestIssue("", "the manifest is empty (expected a mapping with 'algorithm', "
                           "'environment', ...)", Location(file, 1, 1), kind="empty")],
            source=file,
        )
    if not isinstance(doc.data, Mapping):
        line, column = (node.start_mark.line + 1, node.start_mark.column + 1) if node else (1, 1)
        kind = type(doc.data).__name__
        raise ManifestError(
            [ManifestIssue("", f"the manifest must be a mapping of sections, got a {kind}",
                           Location(file, line, column), kind="type")],
            source=file,
        )


def load_file(path: str | os.PathLike[str]) -> LocatedDocument:
    """Read and parse a manifest file. A missing file raises ``FileNotFoundError``."""
    file = os.fspath(path)
    try:
        with open(file, "rb") as stream:
            raw = stream.read(MAX_MANIFEST_BYTES + 1)
            if len(raw) > MAX_MANIFEST_BYTES:  # a device or pipe may not know its size
                size = stream.seek(0, os.SEEK_END) if stream.seekable() else 0
                _check_size(max(size, len(raw)), file)
    except IsADirectoryError:
        raise ManifestError(
            [ManifestIssue("", "is a directory, not a manifest file", None, kind="file")],
            source=file,
        ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ManifestError(
            [ManifestIssue("", f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                           Location(file, 1, 1), kind="syntax")],
            source=file,
        ) from None
    return parse_text(text, file)


def iter_paths(data: object, prefix: PathKey = ()) -> Iterator[PathKey]:
    """Every key path of a nested mapping/list structure (depth first)."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            yield (*prefix, key)
            yield from iter_paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from iter_paths(value, (*prefix, index))


def non_finite_paths(data: object, prefix: PathKey = ()) -> Iterator[tuple[PathKey, float]]:
    """Every number that is infinite or NaN (``.inf``, ``1e999``, ``.nan``), with its path.

    JSON has no such numbers and no manifest field can use one, so they are refused
    everywhere, free-form mappings included.
    """
    if isinstance(data, float) and not math.isfinite(data):
        yield prefix, data
    elif isinstance(data, Mapping):
        for key, value in data.items():
            yield from non_finite_paths(value, (*prefix, key))
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            yield from non_finite_paths(value, (*prefix, index))


def format_path(path: PathKey) -> str:
    """Dotted form of a key path: ``('network', 'head_config', 'hidden_size', 0)`` →
    ``network.head_config.hidden_size[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
