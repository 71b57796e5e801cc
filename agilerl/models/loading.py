"""Read manifest files (YAML or JSON) and remember where every key is written.

JSON is YAML, so both go through one safe YAML loader (libyaml's when available). Besides
the plain data, the loader returns a map from each key's path to its file position so
that errors can point at ``file:line:col``. Syntax errors, empty files, documents that are
not a mapping, and duplicate keys are reported as :class:`ManifestError` naming the file
and line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agilerl.models.errors import Location, ManifestError, ManifestIssue

PathKey = tuple[Any, ...]

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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

    data: Any
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


def _walk(node: yaml.Node, prefix: PathKey, loader: Any, doc: LocatedDocument) -> None:
    """Record positions of mapping keys and sequence items below ``node``."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, tuple[int, int]] = {}
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


def _scalar_key(node: yaml.Node, loader: Any) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_object(node)
        return value if isinstance(value, str | int | float | bool) or value is None else str(value)
    return f"<{getattr(node, 'id', 'node')}>"


def parse_text(text: str, file: str | None = None) -> LocatedDocument:
    """Parse YAML/JSON text into a :class:`LocatedDocument` (raises :class:`ManifestError`)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
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
    if node is None or doc.data is None:
        raise ManifestError(
            [ManifestIssue("", "the manifest is empty (expected a mapping with 'algorithm', "
                           "'environment', ...)", Location(file, 1, 1), kind="empty")],
            source=file,
        )
    if not isinstance(doc.data, Mapping):
        mark = node.start_mark
        kind = type(doc.data).__name__
        raise ManifestError(
            [ManifestIssue("", f"the manifest must be a mapping of sections, got a {kind}",
                           Location(file, mark.line + 1, mark.column + 1), kind="type")],
            source=file,
        )


def load_file(path: str | os.PathLike[str]) -> LocatedDocument:
    """Read and parse a manifest file. A missing file raises ``FileNotFoundError``."""
    file = os.fspath(path)
    try:
        raw = Path(file).read_bytes()
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


def iter_paths(data: Any, prefix: PathKey = ()) -> Iterator[PathKey]:
    """Every key path of a nested mapping/list structure (depth first)."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            yield (*prefix, key)
            yield from iter_paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from iter_paths(value, (*prefix, index))


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
