"""Printing answers for the ``arena`` command: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO, cast

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject, JsonValue


__all__ = ["csv_table", "emit", "experiment_summary", "table", "to_text"]


def emit(value: object, as_json: bool, out: TextIO | None = None) -> None:
    """Print *value* as JSON (``--json``) or as a table / text."""
    stream = out or sys.stdout
    if as_json:
        stream.write(json.dumps(value, indent=2, default=str) + "\n")
    else:
        text = to_text(value)
        if text:
            stream.write(text + "\n")
    stream.flush()


def to_text(value: object) -> str:
    """A human rendering: dict -> Field/Value table, list of dicts -> one table."""
    if isinstance(value, dict):
        if value and all(_is_env_versions(v) for v in value.values()):
            return _environments(value)
        return table(["Field", "Value"], [[k, _cell(v)] for k, v in value.items()])
    if isinstance(value, list):
        if not value:
            return "(none)"
        if all(isinstance(row, dict) for row in value):
            columns: list[str] = []
            for row in value:
                columns.extend(k for k in row if k not in columns)
            return table(columns, [[_cell(row.get(c)) for c in columns] for row in value])
        return table(["Value"], [[_cell(v)] for v in value])
    return "" if value is None else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain aligned text table."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def csv_table(text: str) -> str:
    """Render CSV text as a table (pivoted when it has more columns than rows)."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return "(no rows)"
    header, body = rows[0], rows[1:]
    if len(header) > len(body) + 1:
        pivot = [
            [name] + [r[i] if i < len(r) else "" for r in body] for i, name in enumerate(header)
        ]
        return table(["metric"] + [f"row {i + 1}" for i in range(len(body))], pivot)
    return table(header, body)


def experiment_summary(row: Mapping[str, JsonValue]) -> str:
    """``arena experiments status`` for people: one ``Label  value`` line per fact."""
    latest = cast("JsonObject", row.get("latest_checkpoint") or {})  # the server's object
    steps = f"{_count(row.get('steps'))} / {_count(row.get('max_steps'))} per agent"
    lines = [
        ("Experiment", f"{row.get('name')} (project {row.get('project') or '-'})"),
        ("Status", str(row.get("state") or "-")),
        ("Algorithm", f"{row.get('algorithm') or '-'} on {row.get('environment') or '-'}"),
        ("Generation", _cell(latest.get("generation"))),
        ("Steps", steps),
        ("Best fitness", _cell(latest.get("evaluation_score"))),
        ("Elite member", _cell(latest.get("elite_member"))),
        ("Checkpoint", str(latest.get("name") or "none yet")),
        ("Created", _cell(row.get("created_at"))),
        ("Started", _cell(row.get("started_at"))),
        ("Finished", _cell(row.get("finished_at"))),
    ]
    if row.get("error"):
        lines.append(("Error", str(row["error"])))
    width = max(len(label) for label, _ in lines)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in lines)


def _count(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "-"


def _is_env_versions(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, dict) and {"validated", "profiled"} <= set(v) for v in value.values()
    )


def _environments(catalogue: Mapping[str, Mapping[str, Mapping[str, object]]]) -> str:
    rows = [
        [name, version, _tick(flags.get("validated")), _tick(flags.get("profiled"))]
        for name, versions in catalogue.items()
        for version, flags in versions.items()
    ]
    return table(["Environment", "Version", "Validated", "Profiled"], rows)


def _tick(flag: object) -> str:
    return "yes" if flag else "no"


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    return str(value)
