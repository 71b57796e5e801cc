"""What a submitted manifest may ask of this server: validity, code, paths and budget."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from agilerl.arena.server.errors import ApiError

#: environment fields that make the worker import or execute user-supplied code.
CODE_FIELDS = ("entrypoint", "path", "wrappers", "reward_file_path")
#: keys whose string values are file system paths (besides ``*_path``, ``*_dir``, ``*_file``).
PATH_KEYS = frozenset({"path", "features", "targets"})
DEFAULT_MAX_STEPS = 1_000_000
DEFAULT_POP_SIZE = 1


def _located(errors: list[dict[str, Any]]) -> list[str]:
    out = []
    for err in errors:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__") or "manifest"
        out.append(f"{loc}: {err.get('msg', 'invalid value')}")
    return out


def _issue_lines(exc: Exception) -> list[str]:
    """``path: message`` lines from a ManifestError (``issues``) or a pydantic error."""
    issues = getattr(exc, "issues", None)
    if issues:
        return [str(i) for i in issues]  # "path: message (did you mean ...?)"
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return _located(errors(include_url=False))
    return [f"manifest: {exc}"]


def validate_manifest(manifest: Any) -> tuple[dict[str, Any], list[str]]:
    """Validate with the light Arena models; return the JSON dump the worker runs + warnings.

    Uses the same ``TrainingManifest.get_validated(..., mode="json")`` the client runs, so
    both sides accept and normalise exactly the same manifests. Raises 422
    ``MANIFEST_INVALID`` whose ``errors`` list names each field
    (``training.max_steps: Input should be greater than 0``).
    """
    if not isinstance(manifest, dict):
        raise ApiError(422, "MANIFEST_INVALID", "The manifest must be a JSON object",
                       errors=["manifest: expected an object"])
    import warnings

    from agilerl.arena.models import TrainingManifest

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            dumped = dict(TrainingManifest.get_validated(manifest, mode="json"))
        except (TypeError, ValueError, KeyError) as exc:  # ManifestError, ValidationError
            errors = _issue_lines(exc)
            raise ApiError(422, "MANIFEST_INVALID",
                           f"The manifest is invalid ({len(errors)} problem(s))",
                           errors=errors) from None
    return dumped, [str(w.message) for w in caught]


def run_manifest(raw: dict[str, Any], validated: dict[str, Any]) -> dict[str, Any]:
    """The manifest the worker runs: the validated Arena payload, made runnable locally.

    * Empty top-level sections (the Arena payload always carries ``network: {}``,
      ``mutation: {}``, ``tournament_selection: {}``) mean "unset", as on hosted Arena,
      and are dropped so the local trainer applies its own defaults.
    * ``environment`` is free-form on Arena: keys the light model does not know (``sync``,
      ``config``, and, only on servers allowing custom code, ``entrypoint``...) are kept
      from the submitted section for the local trainer to validate.
    """
    out = {k: v for k, v in validated.items() if not (isinstance(v, dict) and not v)}
    env = raw.get("environment")
    if isinstance(env, dict) and isinstance(out.get("environment"), dict):
        out["environment"] = {**env, **out["environment"]}
    return out


def check_custom_code(manifest: dict[str, Any], allowed: bool) -> None:
    """Refuse fields that run user code unless the operator opted in."""
    if allowed:
        return
    env = manifest.get("environment")
    if not isinstance(env, dict):
        return
    found = [f"environment.{key}" for key in CODE_FIELDS if env.get(key) not in (None, "", [])]
    name = env.get("name")
    if isinstance(name, str) and ":" in name:
        found.append("environment.name")
    if found:
        raise ApiError(
            422, "CUSTOM_CODE_DISABLED",
            "This server does not run user-supplied code; it was not started with"
            " --allow-custom-code",
            errors=[f"{loc}: refused (runs custom code)" for loc in found],
        )


def _is_path_key(key: str) -> bool:
    if key == "pretrained_model_name_or_path":
        return True
    return key in PATH_KEYS or key.endswith(("_path", "_dir", "_file"))


def _path_values(node: Any, loc: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{loc}.{key}" if loc else str(key)
            if isinstance(value, str) and _is_path_key(str(key)):
                yield here, value
            else:
                yield from _path_values(value, here)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _path_values(value, f"{loc}.{i}")


def escapes(path: str) -> bool:
    """True when ``path``, taken relative to an experiment folder, leaves it."""
    text = path.replace("\\", "/")
    if text.startswith(("/", "~")) or (len(text) > 1 and text[1] == ":"):
        return True
    norm = posixpath.normpath(text)
    return norm == ".." or norm.startswith("../")


def check_paths(manifest: dict[str, Any]) -> None:
    """Refuse any path that is absolute or climbs out of the experiment folder."""
    bad = [f"{loc}: '{value}' leaves the experiment folder"
           for loc, value in _path_values(manifest, "") if escapes(value)]
    if bad:
        raise ApiError(422, "PATH_OUTSIDE_EXPERIMENT",
                       "Paths in a manifest must stay inside the experiment folder", errors=bad)


def budget(manifest: dict[str, Any]) -> tuple[int, int]:
    """``(max_steps, pop_size)`` as the trainer will read them."""
    training = manifest.get("training") or {}
    max_steps = training.get("max_steps", DEFAULT_MAX_STEPS)
    pop_size = training.get("pop_size", training.get("population_size", DEFAULT_POP_SIZE))
    return int(max_steps), int(pop_size)


def check_budget(max_steps: int, pop_size: int, cap: int) -> None:
    if max_steps < 1:
        raise ApiError(422, "MANIFEST_INVALID", "max_steps must be at least 1",
                       errors=["training.max_steps: must be at least 1"])
    if max_steps * pop_size > cap:
        raise ApiError(
            422, "BUDGET_EXCEEDED",
            f"pop_size * max_steps = {pop_size * max_steps} exceeds this server's limit of {cap}",
            errors=[f"training.max_steps: {max_steps} x training.pop_size: {pop_size} > {cap}"],
        )
