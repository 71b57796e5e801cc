"""What a submitted manifest may ask of this server: validity, code, paths and budget."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agilerl.arena.server.errors import ApiError

#: environment fields that make the worker import or execute user-supplied code.
CODE_FIELDS = ("entrypoint", "path", "wrappers", "reward_file_path")
#: keys whose string values are file system paths (besides ``*_path``, ``*_dir``, ``*_file``).
PATH_KEYS = frozenset({"path", "features", "targets"})


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


#: evaluation episodes without ``training.eval_steps`` run to termination; the budget counts
#: them as this many vector steps (Gymnasium's usual time limit is at most 1,000).
ASSUMED_EPISODE_STEPS = 1000


@dataclass(frozen=True)
class Budget:
    """The environment steps a manifest asks for, field by field.

    * training: ``pop_size`` agents x ``max_steps`` env steps each (``max_steps`` already
      counts every sub-environment);
    * evaluation: every generation (``ceil(max_steps / evo_steps)``) each agent plays
      ``eval_loop`` rounds of at most ``eval_steps`` vector steps in ``num_envs`` copies.
    """

    max_steps: int
    pop_size: int
    evo_steps: int
    eval_loop: int
    eval_steps: int | None
    num_envs: int

    @property
    def generations(self) -> int:
        return -(-self.max_steps // self.evo_steps)

    @property
    def training_steps(self) -> int:
        return self.pop_size * self.max_steps

    @property
    def evaluation_steps(self) -> int:
        per_round = (self.eval_steps or ASSUMED_EPISODE_STEPS) * self.num_envs
        return self.pop_size * self.generations * self.eval_loop * per_round

    @property
    def total(self) -> int:
        return self.training_steps + self.evaluation_steps

    def lines(self) -> list[str]:
        """One ``field: value`` line per term, for the 422 answer."""
        eval_steps = (f"training.eval_steps: {self.eval_steps}" if self.eval_steps
                      else f"training.eval_steps: null (counted as {ASSUMED_EPISODE_STEPS})")
        return [
            f"training.pop_size: {self.pop_size} x training.max_steps: {self.max_steps}"
            f" = {self.training_steps} training steps",
            f"training.pop_size: {self.pop_size} x {self.generations} generations"
            f" (training.evo_steps: {self.evo_steps}) x training.eval_loop: {self.eval_loop}"
            f" x {eval_steps} x environment.num_envs: {self.num_envs}"
            f" = {self.evaluation_steps} evaluation steps",
        ]


def _field_default(model: Any, name: str) -> Any:
    return model.model_fields[name].default


def _int(section: dict[str, Any], keys: tuple[str, ...], default: Any) -> Any:
    for key in keys:
        value = section.get(key)
        if value is not None:
            return int(value)
    return default


def budget(manifest: dict[str, Any]) -> Budget:
    """The work a (validated) manifest asks for; unset fields take their schema defaults,
    and ``evo_steps`` the algorithm's ``default_evo_steps``."""
    from agilerl.arena.models import _generated as gen

    training = manifest.get("training") or {}
    env = manifest.get("environment") or {}
    algo = str((manifest.get("algorithm") or {}).get("name", ""))
    entry = gen.REGISTRY.get(algo)
    default_evo = entry.default_evo_steps if entry is not None else \
        gen.REGISTRY["DQN"].default_evo_steps
    spec = gen.TrainingSpec
    return Budget(
        max_steps=_int(training, ("max_steps",), _field_default(spec, "max_steps")),
        pop_size=_int(training, ("pop_size", "population_size"),
                      _field_default(spec, "pop_size")),
        evo_steps=max(1, _int(training, ("evo_steps", "metrics_interval"), default_evo)),
        eval_loop=max(1, _int(training, ("eval_loop",), _field_default(spec, "eval_loop"))),
        eval_steps=_int(training, ("eval_steps",), None),
        num_envs=max(1, _int(env, ("num_envs",), _field_default(gen.EnvSpec, "num_envs"))),
    )


def check_budget(work: Budget, cap: int, max_envs: int) -> None:
    """422 ``BUDGET_EXCEEDED`` when the manifest asks for more than this server allows."""
    if work.max_steps < 1:
        raise ApiError(422, "MANIFEST_INVALID", "max_steps must be at least 1",
                       errors=["training.max_steps: must be at least 1"])
    if work.num_envs > max_envs:
        raise ApiError(
            422, "BUDGET_EXCEEDED",
            f"environment.num_envs = {work.num_envs} exceeds this server's limit of {max_envs}",
            errors=[f"environment.num_envs: {work.num_envs} > {max_envs}"], limit=max_envs)
    if work.total > cap:
        raise ApiError(
            422, "BUDGET_EXCEEDED",
            f"The job asks for {work.total} environment steps ({work.training_steps} training"
            f" + {work.evaluation_steps} evaluation), more than this server's limit of {cap}",
            errors=work.lines(), limit=cap)
