"""The plain (unvectorised) environment a trained agent is evaluated in.

Built from the run's manifest ``environment`` section (after any ``environment.*``
overrides) as training builds one sub-env: a Gymnasium env, a PettingZoo parallel env, or
a bandit. A render mode goes to the env's constructor as ``render_mode`` and must be one
the env lists in ``metadata["render_modes"]``. The env must give the observations and take
the actions the agent was trained on.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar, cast, runtime_checkable

from agilerl.core.value_types import Space
from agilerl.evaluation.source import SourceError

if TYPE_CHECKING:
    from agilerl.algorithms.core.base import RLAlgorithm
    from agilerl.models.env import BanditEnvSpec, GymEnvSpec, PzEnvSpec

KINDS = ("gym", "pettingzoo", "bandit")


T = TypeVar("T")


class EvalEnvError(SourceError):
    """The environment cannot be built as asked, or does not fit the agent."""


class PlainEnv(Protocol):
    """What every kind of env :func:`make_env` builds offers; playing it needs more, which
    depends on its kind (:mod:`agilerl.evaluation.episodes`)."""

    def close(self) -> None: ...


@runtime_checkable
class _EnvSpaces(Protocol):
    """A Gymnasium (or bandit) env's spaces."""

    observation_space: Space
    action_space: Space


@runtime_checkable
class _AgentSpaces(Protocol):
    """A PettingZoo env's agents and their spaces."""

    possible_agents: list[str]

    def observation_space(self, agent: str) -> Space: ...

    def action_space(self, agent: str) -> Space: ...


def env_spec(agent: RLAlgorithm, environment: Mapping[str, object] | None,
             base_dir: str | os.PathLike[str] | None = None
             ) -> GymEnvSpec | PzEnvSpec | BanditEnvSpec:
    """The environment spec of ``environment`` (a manifest section) for ``agent``'s algorithm."""
    import pydantic

    from agilerl.models import ALGO_REGISTRY
    from agilerl.models.env import LLMEnvSpec, resolve_env_spec

    if not environment:
        raise EvalEnvError("no environment to evaluate in: the run's manifest was not "
                                "found; name one with environment.name=ID (or --manifest FILE)")
    try:
        spec = resolve_env_spec(ALGO_REGISTRY[agent.algo], dict(environment), base_dir=base_dir)
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"environment.{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in exc.errors())
        raise EvalEnvError(f"invalid environment section: {problems}") from None
    except (TypeError, ValueError) as exc:
        raise EvalEnvError(f"invalid environment section: {exc}") from None
    if isinstance(spec, LLMEnvSpec):  # an RL agent's algorithm never resolves to one
        raise EvalEnvError("an LLM environment is not evaluated by playing episodes")
    return spec


def kind_of(spec: object) -> str:
    """``gym``, ``pettingzoo`` or ``bandit``."""
    from agilerl.models.env import BanditEnvSpec, PzEnvSpec

    if isinstance(spec, PzEnvSpec):
        return "pettingzoo"
    return "bandit" if isinstance(spec, BanditEnvSpec) else "gym"


def make_env(spec: GymEnvSpec | PzEnvSpec | BanditEnvSpec, render_mode: str | None = None,
             seed: int | None = None) -> PlainEnv:
    """One plain env of ``spec``, rendering in ``render_mode`` (None: not rendering)."""
    kind = kind_of(spec)
    if kind == "bandit":
        if render_mode is not None:
            raise EvalEnvError("a bandit environment does not render (drop --render "
                                    "and --record)")
        return cast(PlainEnv, _built(lambda: spec.make_env(), spec))  # a bandit env or the entrypoint's
    from agilerl.models.env import BanditEnvSpec

    assert not isinstance(spec, BanditEnvSpec)  # kind_of said "bandit" for those
    if render_mode is not None:
        config = {**dict(spec.config or {}), "render_mode": render_mode}
        spec = spec.model_copy(update={"config": config})
    with warnings.catch_warnings():
        # gymnasium warns about an unlisted render mode; it is refused below instead
        warnings.simplefilter("ignore", UserWarning)
        env = _built(spec.make_single_env, spec)
    if render_mode is not None:
        _check_render_mode(env, render_mode, spec)
    return env


def _built(build: Callable[[], T], spec: GymEnvSpec | PzEnvSpec | BanditEnvSpec) -> T:
    from agilerl.core.errors import missing_extra

    label = spec.name or getattr(spec, "entrypoint", None) or "the environment"
    try:
        return build()
    except TypeError as exc:
        if "render_mode" in str(exc):
            raise EvalEnvError(f"environment {label} cannot render: its constructor "
                                    "takes no render_mode") from None
        raise EvalEnvError(f"environment {label} cannot be built: {exc}") from None
    except FileNotFoundError as exc:
        raise EvalEnvError(f"environment {label} cannot be built: {exc} (a relative path in "
                           "a run's manifest is relative to the folder training started "
                           "in: evaluate from there, or override the field with "
                           "environment.FIELD=/absolute/path)") from None
    except Exception as exc:  # noqa: BLE001 - any failure of user or package code is reported
        hint = missing_extra(exc, f"environment {label}")
        raise EvalEnvError(str(hint) if hint else
                                f"environment {label} cannot be built: "
                                f"{type(exc).__name__}: {exc}") from None


def _check_render_mode(env: PlainEnv, mode: str,
                       spec: GymEnvSpec | PzEnvSpec | BanditEnvSpec) -> None:
    supported = list((getattr(env, "metadata", None) or {}).get("render_modes") or [])
    if mode not in supported:
        env.close()
        listed = ", ".join(supported) if supported else "none"
        raise EvalEnvError(f"environment {spec.name or spec.entrypoint} does not support "
                                f"render mode {mode!r} (it supports: {listed})")


def check_fits(agent: RLAlgorithm, env: object, kind: str) -> None:
    """Refuse an env whose agents or space shapes differ from those the agent learnt on."""
    if kind == "pettingzoo":
        from agilerl.algorithms.core.multi_agent import MultiAgentRLAlgorithm

        # kind_of gives "pettingzoo" for the env spec of a multi-agent algorithm only
        assert isinstance(agent, MultiAgentRLAlgorithm)
        assert isinstance(env, _AgentSpaces)  # read just below
        expected, found = list(agent.agent_ids), list(env.possible_agents)
        if sorted(expected) != sorted(found):
            raise EvalEnvError(f"the agent was trained for agents {expected}; this "
                                    f"environment has {found}")
        pairs = [(f"agent {a}", agent.observation_spaces[a], env.observation_space(a),
                  agent.action_spaces[a], env.action_space(a)) for a in expected]
    else:
        assert isinstance(env, _EnvSpaces)  # read just below
        pairs = [("", agent.observation_space, env.observation_space,
                  agent.action_space, env.action_space)]
    for who, obs_a, obs_e, act_a, act_e in pairs:
        for what, mine, theirs in (("observation", obs_a, obs_e), ("action", act_a, act_e)):
            if _shape(mine) != _shape(theirs):
                raise EvalEnvError(
                    f"the agent was trained on {what} space {_describe(mine)}"
                    f"{' of ' + who if who else ''}; this environment has {_describe(theirs)}")


def _shape(space: object) -> object:
    """What must agree between the training and the evaluation space."""
    if hasattr(space, "spaces") and isinstance(space.spaces, Mapping):
        return {k: _shape(v) for k, v in space.spaces.items()}
    if hasattr(space, "spaces"):
        return [_shape(s) for s in space.spaces]
    return (type(space).__name__, getattr(space, "shape", None), getattr(space, "n", None))


def _describe(space: object) -> str:
    """A space in a few words: its kind and shape (bounds left out)."""
    if hasattr(space, "n"):
        return f"{type(space).__name__}({space.n})"
    shape = getattr(space, "shape", None)
    return f"{type(space).__name__} of shape {shape}" if shape else str(space)
