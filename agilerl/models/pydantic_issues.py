"""Turn Pydantic validation errors into located manifest issues.

Pydantic reports a ``loc`` tuple that may contain union branch labels (a class name, a
discriminator tag) between real keys; this module keeps only the keys the user wrote, so
paths read like the manifest (``network.encoder_config.hidden_size[1]``). An unknown key
gets a "did you mean" from the field names valid at that place.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from agilerl.core.manifest_errors import ManifestIssue
from agilerl.models.loading import LocatedDocument, PathKey, format_path
from agilerl.models.suggest import closest

_MESSAGES = {
    "missing": "required key is missing",
    "extra_forbidden": "unknown key",
}


def field_names(model: type[BaseModel]) -> list[str]:
    """Every spelling a model accepts for its fields: names and aliases."""
    names: list[str] = []
    for name, info in model.model_fields.items():
        names += [name, *field_names_of(info)]
    return list(dict.fromkeys(names))


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType) or origin in (list, tuple, dict, set) \
            or origin is not None:
        found: list[type[BaseModel]] = []
        for arg in typing.get_args(annotation):
            found += _models_in(arg)
        return found
    return []


def model_at(root: type[BaseModel], loc: Iterable[str | int]) -> type[BaseModel] | None:
    """The model class that holds the last key of a Pydantic ``loc`` (None if unknown)."""
    current: list[type[BaseModel]] = [root]
    parts = list(loc)
    for part in parts[:-1]:
        if isinstance(part, int):
            continue
        nxt: list[type[BaseModel]] = []
        for model in current:
            if part in model.model_fields:
                nxt += _models_in(model.model_fields[part].annotation)
            else:
                alias_hit = [n for n, f in model.model_fields.items()
                             if part in field_names_of(f)]
                for name in alias_hit:
                    nxt += _models_in(model.model_fields[name].annotation)
        branch = [m for m in current if m.__name__ == part]
        if branch:
            nxt = branch
        elif not nxt:
            # A discriminator tag (e.g. 'tournament'): keep the candidates and move on.
            nxt = [m for m in current if _tag_matches(m, part)] or current
        current = nxt
    return current[0] if len(current) == 1 else (current[0] if current else None)


def field_names_of(info: FieldInfo) -> list[str]:
    """The other spellings of one field: its alias and validation aliases."""
    out = []
    if info.alias:
        out.append(info.alias)
    choices = getattr(info.validation_alias, "choices", None)
    if choices:
        out += [c for c in choices if isinstance(c, str)]
    elif isinstance(info.validation_alias, str):
        out.append(info.validation_alias)
    return out


def _tag_matches(model: type[BaseModel], tag: object) -> bool:
    for info in model.model_fields.values():
        args = typing.get_args(info.annotation)
        if tag in args:
            return True
    return False


def clean_loc(data: object, loc: Iterable[str | int]) -> PathKey:
    """Keep only the parts of a Pydantic ``loc`` that name keys/indices present in ``data``
    (the last part is kept even when absent: it names a missing key)."""
    parts = list(loc)
    out: list[str | int] = []
    current: Any = data  # walked down by the parts that _has finds in it
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if _has(current, part):
            out.append(part)
            current = current[part]
        elif last and isinstance(part, str) and part.isidentifier() and not _is_label(part):
            out.append(part)
    return tuple(out)


def _has(container: object, part: object) -> bool:
    if isinstance(container, Mapping):
        return part in container
    return isinstance(container, list | tuple) and isinstance(part, int) and 0 <= part < len(container)


def _is_label(part: str) -> bool:
    """Union branch labels Pydantic inserts into ``loc`` (``function-after[...]``, ``list[...]``)."""
    return "[" in part or part[:1].isupper()


def issues_from_validation_error(
    exc: ValidationError,
    *,
    data: object,
    prefix: PathKey,
    doc: LocatedDocument | None,
    model: type[BaseModel] | None = None,
) -> list[ManifestIssue]:
    """One located issue per Pydantic error (duplicates from union branches dropped)."""
    issues: list[ManifestIssue] = []
    seen: set[tuple[str, str]] = set()
    for err in exc.errors(include_url=False):
        path = (*prefix, *clean_loc(data, err["loc"]))
        message = _message(err)
        suggestion = None
        if err["type"] == "extra_forbidden" and model is not None:
            holder = model_at(model, err["loc"])
            if holder is not None:
                suggestion = closest(str(err["loc"][-1]), field_names(holder))
        key = (format_path(path), message)
        if key in seen:
            continue
        seen.add(key)
        issues.append(ManifestIssue(
            path=format_path(path),
            message=message,
            location=doc.locate(path) if doc else None,
            suggestion=suggestion,
            kind="schema",
        ))
    return issues


def _message(err: ErrorDetails) -> str:
    kind = err["type"]
    if kind in _MESSAGES:
        return _MESSAGES[kind]
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if "input" in err and kind not in ("model_type", "dict_type", "union_tag_invalid") \
            and not isinstance(err["input"], Mapping | list):
        msg += f" (got {err['input']!r})"
    return msg


def unknown_keys(model: type[BaseModel], data: object, prefix: PathKey = ()) -> list[PathKey]:
    """Paths of keys in ``data`` that ``model`` (and its nested models) do not define.

    For models that ignore unknown keys instead of rejecting them (the Arena models), so
    they can still be reported. In a union the member defining most of the keys is used.
    """
    if not isinstance(data, Mapping):
        return []
    found: list[PathKey] = []
    names = field_names(model)
    for key, value in data.items():
        if key not in names:
            found.append((*prefix, key))
            continue
        info = model.model_fields.get(key) or next(
            (f for f in model.model_fields.values() if key in field_names_of(f)), None)
        if info is None:
            continue
        found += _unknown_in_value(info.annotation, value, (*prefix, key))
    return found


def _unknown_in_value(annotation: object, value: object, path: PathKey) -> list[PathKey]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unknown_in_value(typing.get_args(annotation)[0], value, path)
    if origin is dict and isinstance(value, Mapping):
        inner = typing.get_args(annotation)[-1]
        return [p for k, v in value.items() for p in _unknown_in_value(inner, v, (*path, k))]
    if origin is list and isinstance(value, list):
        inner = typing.get_args(annotation)[0]
        return [p for i, v in enumerate(value) for p in _unknown_in_value(inner, v, (*path, i))]
    candidates = _models_in(annotation)
    if not candidates or not isinstance(value, Mapping):
        return []
    best = max(candidates, key=lambda m: sum(1 for k in value if k in field_names(m)))
    return unknown_keys(best, value, path)
