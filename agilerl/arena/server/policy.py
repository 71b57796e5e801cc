"""What a submitted manifest may ask of this server: validity, code, paths and budget."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from agilerl.arena.server.config import ServerConfig
from agilerl.arena.server.errors import ApiError

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic_core import ErrorDetails

    from agilerl.core.value_types import JsonObject

_Default = TypeVar("_Default", int, int | None)

#: environment fields that make the worker import or execute user-supplied code.
CODE_FIELDS = ("entrypoint", "path", "wrappers", "reward_file_path")
#: keys whose string values are file system paths (besides ``*_path``, ``*_dir``, ``*_file``).
PATH_KEYS = frozenset({"path", "features", "targets"})


def _located(errors: Iterable[ErrorDetails]) -> list[str]:
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


def validate_manifest(manifest: object) -> tuple[JsonObject, list[str]]:
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


def run_manifest(raw: Mapping[str, object], validated: JsonObject) -> JsonObject:
    """The manifest the worker runs: the validated Arena payload, made runnable locally.

    * Empty top-level sections (the Arena payload always carries ``network: {}``,
      ``mutation: {}``, ``tournament_selection: {}``) mean "unset", as on hosted Arena,
      and are dropped so the local trainer applies its own defaults.
    * ``environment`` is free-form on Arena: keys the light model does not know (``sync``,
      ``config``, and, only on servers allowing custom code, ``entrypoint``...) are kept
      from the submitted section for the local trainer to validate.
    """
    out: JsonObject = {k: v for k, v in validated.items() if not (isinstance(v, dict) and not v)}
    env = raw.get("environment")
    section = out.get("environment")
    if isinstance(env, dict) and isinstance(section, dict):
        out["environment"] = {**env, **section}
    return out


def check_custom_code(manifest: Mapping[str, object], allowed: bool) -> None:
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


def _path_values(node: object, loc: str) -> Iterator[tuple[str, str]]:
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


def check_paths(manifest: Mapping[str, object]) -> None:
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


def section(manifest: Mapping[str, object], name: str) -> Mapping[str, object]:
    """The section ``name`` of a validated manifest (where each is a mapping); empty when
    unset."""
    found = manifest.get(name) or {}
    assert isinstance(found, Mapping), f"{name} is not a mapping"
    return found


def _count(value: object) -> int:
    """A number of a validated manifest (an int there)."""
    assert isinstance(value, int | float | str), f"{value!r} is not a number"
    return int(value)


def _field_default(model: type[BaseModel], name: str) -> int:
    default = model.model_fields[name].default
    assert isinstance(default, int)  # the schema's counts default to numbers
    return default


def _int(section: Mapping[str, object], keys: tuple[str, ...], default: _Default
         ) -> int | _Default:
    for key in keys:
        value = section.get(key)
        if value is not None:
            return _count(value)
    return default


def budget(manifest: Mapping[str, object]) -> Budget:
    """The work a (validated) manifest asks for; unset fields take their schema defaults,
    and ``evo_steps`` the algorithm's ``default_evo_steps``."""
    from agilerl.arena.models import _generated as gen

    training = section(manifest, "training")
    env = section(manifest, "environment")
    algo = str(section(manifest, "algorithm").get("name", ""))
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


# ---- what one job may hold besides its steps (checkpoints, repetitions, networks) -------


def _exceeded(message: str, errors: list[str], limit: int) -> ApiError:
    return ApiError(422, "BUDGET_EXCEEDED", message, errors=errors, limit=limit)


def check_checkpoints(manifest: Mapping[str, object], work: Budget, max_checkpoints: int
                      ) -> None:
    """At most ``max_checkpoints`` saves per job: ``checkpoint_steps: 1`` would write one
    per step (hundreds of MB a minute) whatever the step budget."""
    every = section(manifest, "training").get("checkpoint_steps")
    if every is None:
        return  # the server's own interval (max_steps // checkpoint_fraction)
    count = -(-work.max_steps // max(1, _count(every)))
    if count > max_checkpoints:
        least = -(-work.max_steps // max_checkpoints)
        raise _exceeded(
            f"training.checkpoint_steps = {every} saves {count} checkpoints over"
            f" training.max_steps = {work.max_steps}; this server keeps at most"
            f" {max_checkpoints} per job", [f"training.checkpoint_steps: {every} < {least}"
                                            f" (at most {max_checkpoints} checkpoints)"],
            max_checkpoints)


#: repetition counts the step budget does not see: passes over each rollout per update,
#: and over a dataset (which replaces ``max_steps``).
EPOCH_FIELDS = (("algorithm", "update_epochs"), ("training", "num_epochs"))


def check_epochs(manifest: Mapping[str, object], max_epochs: int) -> None:
    bad = []
    for name, key in EPOCH_FIELDS:
        value = section(manifest, name).get(key)
        if isinstance(value, int) and value > max_epochs:
            bad.append(f"{name}.{key}: {value} > {max_epochs}")
    if bad:
        raise _exceeded(f"{bad[0].split(':')[0]} repeats the work of each update more than"
                        f" this server's limit of {max_epochs} times", bad, max_epochs)


def check_network(manifest: Mapping[str, object], pop_size: int, max_width: int, max_depth: int,
                  max_params: int) -> None:
    """Layer widths and counts within the caps, and the population's networks (at the
    size mutation may grow them to, :mod:`.network_budget`) within ``max_params``."""
    from agilerl.arena.server import network_budget as nb

    network = manifest.get("network") or {}
    wide = [f"{loc}: {w} > {max_width}" for loc, w in nb.width_fields(network) if w > max_width]
    if wide:
        raise _exceeded(f"{wide[0].split(':')[0]} is wider than this server's limit of"
                        f" {max_width}", wide, max_width)
    deep = [f"{loc}: {d} > {max_depth}" for loc, d in nb.depth_fields(network) if d > max_depth]
    if deep:
        raise _exceeded(f"{deep[0].split(':')[0]} has more layers than this server's limit"
                        f" of {max_depth}", deep, max_depth)
    specs = list(nb.layer_specs(network))
    per_agent = sum(s.params for s in specs)
    if pop_size * per_agent > max_params:
        lines = [f"{s.where}: up to {s.depth} layers x {s.width} wide = about {s.params:,}"
                 " weights" for s in specs]
        raise _exceeded(
            f"training.pop_size: {pop_size} x about {per_agent:,} hidden weights per agent"
            f" = {pop_size * per_agent:,}, more than this server's limit of {max_params:,}",
            [*lines, f"training.pop_size: {pop_size}"], max_params)


def check_limits(manifest: Mapping[str, object], config: ServerConfig) -> Budget:
    """Every budget check a submitted or resumed manifest goes through; returns its
    :class:`Budget`. 422 ``BUDGET_EXCEEDED`` names the fields over a limit."""
    work = budget(manifest)
    check_budget(work, config.max_total_steps, config.max_envs)
    check_checkpoints(manifest, work, config.max_checkpoints_per_job)
    check_epochs(manifest, config.max_epochs)
    check_network(manifest, work.pop_size, config.max_network_width,
                  config.max_network_depth, config.max_network_params)
    return work
