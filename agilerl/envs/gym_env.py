"""Build Gymnasium environments (single and vectorised) from an environment spec.

``spec`` is a ``GymEnvSpec`` / ``OfflineEnvSpec`` or any object with the same attributes
(``name``, ``num_envs``, ``entrypoint``, ``path``, ``config``, ``wrappers``, ``sync``); they
are read with ``getattr`` so a plain namespace works too.

Sub-env construction
    * with an ``entrypoint``: ``constructor(**config)``, then ``wrappers`` in order;
    * with a registered id: ``gymnasium.make(name, **config)``, then ``wrappers`` in order.
      Unlike the reference library, ``config`` and ``wrappers`` are honoured for
      registered ids too (it silently ignores them there).
    * ``extra_wrappers`` (wrapper callables from the caller) are applied last.
    * Atari (``ALE/*`` ids, ale-py): ``config`` also holds the preprocessing options
      (frame skip, grey scale, resize, frame stack, ...; :mod:`agilerl.envs.atari`), applied
      before ``wrappers``; with 4+ sub-envs and no wrappers ale-py's native vector env
      does the same preprocessing itself.

Vectorisation rule (:func:`vector_mode`)
    1. ``native``: the id has a NumPy vector implementation in Gymnasium (CartPole's
       ``CartPoleVectorEnv``), there is no entrypoint, no wrappers, no extra wrappers,
       every ``config`` key is accepted by that implementation, and ``num_envs`` is at
       least :data:`NATIVE_MIN_ENVS`. Used whatever ``sync`` says: it steps all sub-envs in
       one NumPy call (CartPole, 16 envs, 2 cores: ~370k steps/s against ~125k for sync and
       ~17k for Gymnasium's async; ``bench/env_step_rate.py``). Below 4 envs NumPy's per-call overhead
       makes it slower than a sync loop over plain envs.
    2. ``sync``: ``sync: true``, or a single sub-env (a subprocess for one env only adds
       inter-process latency), or ``sync`` unset and one step of all sub-envs, timed on a
       probe copy, under 2 ms (:mod:`agilerl.envs.step_cost`: Pendulum, MountainCar,
       Acrobot, LunarLander with 8 copies; with worker processes of its own an env also
       keeps the population's members from training in parallel).
    3. ``async``: otherwise (``sync: false``, or a costlier step): a
       :class:`ChunkedAsyncVectorEnv`, i.e. one
       worker process per available core, each stepping a contiguous chunk of the sub-envs
       (Gymnasium's ``AsyncVectorEnv`` uses one process per sub-env: with 16 envs on 2
       cores it spends most of a step on inter-process round trips; CartPole, 16 envs:
       ~13k steps/s against ~50k chunked). Worth it only for envs whose step costs far more
       than a round trip (physics engines, emulators); for cheap envs on few cores
       ``sync: true`` is faster still. Its sub-env ``i`` is seeded ``seed + i`` like a sync
       env's, so both give the same trajectories.

Autoreset
    Every vector env built here uses Gymnasium's default ``NEXT_STEP`` autoreset mode
    (the only mode the native implementations support) and reports it in
    ``env.metadata["autoreset_mode"]``. In that mode the step *after* a sub-env reports
    ``terminated or truncated`` ignores its action and returns the first observation of a
    new episode with reward 0 and both flags false; that step is not a transition and must
    not be stored or counted as part of an episode.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Literal

import gymnasium
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

from agilerl.env_registry import SHIPPED_ENVS, register_shipped_envs
from agilerl.envs.atari import FoldedSeeds, is_atari_id, make_atari_env, require_ale
from agilerl.envs.chunked_async import ChunkedAsyncVectorEnv
from agilerl.envs.entrypoint import resolve_entrypoint
from agilerl.envs.step_cost import IN_PROCESS_BUDGET_S, step_seconds
from agilerl.envs.wrappers import ResolvedWrapper, apply_wrappers, resolve_wrappers

__all__ = [
    "AUTORESET_MODE",
    "BOX2D_INSTALL_HINT",
    "NATIVE_MIN_ENVS",
    "VectorMode",
    "make_env_factory",
    "make_single_env",
    "make_vector_env",
    "vector_mode",
]

AUTORESET_MODE: AutoresetMode = AutoresetMode.NEXT_STEP
"""The autoreset mode of every vector env this package builds."""

BOX2D_INSTALL_HINT = "pip install 'agilerl[box2d]'"

VectorMode = Literal["native", "sync", "async"]

NATIVE_MIN_ENVS = 4
"""Fewest sub-envs for which a native vector implementation beats a sync loop."""


def spec_field(spec: object, field: str) -> Any:
    """``spec.field``, or None: a spec's fields are read by name (their types are the
    spec model's, or whatever a plain namespace standing in for it holds)."""
    return getattr(spec, field, None)


def _num_envs(spec: object) -> int:
    num_envs = spec_field(spec, "num_envs")
    if num_envs is None:
        raise ValueError("Environment spec has no 'num_envs'.")
    num_envs = int(num_envs)
    if num_envs < 1:
        raise ValueError(f"Environment 'num_envs' must be >= 1, got {num_envs}.")
    return num_envs


def _registered_spec(name: str) -> gymnasium.envs.registration.EnvSpec | None:
    try:
        return gymnasium.spec(name)
    except gymnasium.error.Error:
        return None


def _box2d_installed() -> bool:
    return importlib.util.find_spec("Box2D") is not None


def _check_box2d(name: str) -> None:
    """Raise an install hint instead of Gymnasium's raw error for Box2D ids."""
    registered = _registered_spec(name)
    entry_point = registered.entry_point if registered is not None else None
    is_box2d = isinstance(entry_point, str) and entry_point.startswith("gymnasium.envs.box2d")
    if is_box2d and not _box2d_installed():
        raise ImportError(
            f"Environment '{name}' needs Box2D, which is not installed. "
            f"Install it with: {BOX2D_INSTALL_HINT}"
        )


def make_env_factory(
    spec: object, extra_wrappers: Sequence[object] | None = None
) -> Callable[[], gymnasium.Env]:
    """Return a zero-argument callable that builds one (unvectorised) sub-env.

    Entrypoints and wrappers are resolved once, here, so building many sub-envs does not
    re-execute user files, and resolution errors surface before any env is built.
    """
    name = spec_field(spec, "name")
    entrypoint = spec_field(spec, "entrypoint")
    path = spec_field(spec, "path")
    config = dict(spec_field(spec, "config") or {})
    wrappers: list[ResolvedWrapper] = resolve_wrappers(spec_field(spec, "wrappers"), path)
    wrappers += resolve_wrappers(extra_wrappers, path)

    if entrypoint:
        constructor: Callable[..., gymnasium.Env] = resolve_entrypoint(entrypoint, path)
    else:
        if not name:
            raise ValueError("Environment spec needs a 'name' (a Gymnasium id) or an 'entrypoint'.")
        atari = is_atari_id(name)
        if atari:
            require_ale()
        elif name in SHIPPED_ENVS:
            register_shipped_envs()
        # Unknown ids fail here, in this process, with Gymnasium's "Did you mean" message,
        # rather than inside a subprocess of an async vector env.
        gymnasium.spec(name)
        _check_box2d(name)

        def constructor(**kwargs: object) -> gymnasium.Env:
            if atari:  # registers ALE in worker processes too
                return make_atari_env(name, kwargs)
            make: Callable[..., gymnasium.Env] = gymnasium.make  # checks the keywords itself
            return make(name, **kwargs)

    def factory() -> gymnasium.Env:
        return apply_wrappers(constructor(**config), wrappers)

    return factory


def make_single_env(spec: object,
                    extra_wrappers: Sequence[object] | None = None) -> gymnasium.Env:
    """Build one unvectorised env from ``spec`` (entrypoint or id, config, wrappers)."""
    return make_env_factory(spec, extra_wrappers)()


def _native_entry_point(name: str) -> Callable[..., object] | None:
    registered = _registered_spec(name)
    if registered is None or registered.vector_entry_point is None:
        return None
    entry = registered.vector_entry_point
    if callable(entry):
        return entry
    module_name = entry.partition(":")[0]
    try:
        if importlib.util.find_spec(module_name) is None:
            return None
        # Gymnasium also registers JAX implementations (phys2d/...); they need jax.
        return gymnasium.envs.registration.load_env_creator(entry)
    except ImportError:
        return None


def _accepts(constructor: Callable[..., object], keys: Sequence[str]) -> bool:
    try:
        parameters = inspect.signature(constructor).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return not keys
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True
    return all(key in parameters for key in keys)


def vector_mode(spec: object, extra_wrappers: Sequence[object] | None = None) -> VectorMode:
    """Which vectoriser :func:`make_vector_env` uses for ``spec`` (see the module docs)."""
    name = spec_field(spec, "name")
    customised = bool(spec_field(spec, "entrypoint") or spec_field(spec, "wrappers") or extra_wrappers)
    if not customised and is_atari_id(name):
        require_ale()
    if not customised and name and _num_envs(spec) >= NATIVE_MIN_ENVS:
        native = _native_entry_point(name)
        if native is not None and _accepts(native, list(spec_field(spec, "config") or {})):
            return "native"
    sync = spec_field(spec, "sync")
    if sync or _num_envs(spec) == 1:
        return "sync"
    if sync is None and _cheap_to_step(spec, extra_wrappers):
        return "sync"
    return "async"


def _cheap_to_step(spec: object, extra_wrappers: Sequence[object] | None) -> bool:
    """Whether one step of all of ``spec``'s sub-envs, timed on a probe copy, takes less
    than :data:`~agilerl.envs.step_cost.IN_PROCESS_BUDGET_S`."""
    key = (spec_field(spec, "name"), spec_field(spec, "entrypoint"), spec_field(spec, "path"),
           repr(spec_field(spec, "config")), repr(spec_field(spec, "wrappers")), repr(extra_wrappers))
    seconds = step_seconds(key, make_env_factory(spec, extra_wrappers))
    return seconds is not None and seconds * _num_envs(spec) < IN_PROCESS_BUDGET_S


def make_vector_env(
    spec: object, extra_wrappers: Sequence[object] | None = None, seed: int | None = None
) -> VectorEnv:
    """Build the vectorised env of ``spec`` (``num_envs`` sub-envs; rule in the module docs).

    Args:
        spec: an env spec (``GymEnvSpec``, ``OfflineEnvSpec`` or an object with its fields).
        extra_wrappers: wrappers (any accepted form) applied to every sub-env after the
            spec's own; their presence disables the native implementation.
        seed: when given, the env is reset once with this seed (sub-env ``i`` of a sync or
            async env gets ``seed + i``) and its action spaces are seeded, so a later
            ``reset()`` without a seed continues deterministically.

    Returns:
        A Gymnasium ``VectorEnv`` in ``NEXT_STEP`` autoreset mode
        (``env.metadata["autoreset_mode"]``).
    """
    num_envs = _num_envs(spec)
    mode = vector_mode(spec, extra_wrappers)
    env: VectorEnv
    if mode == "native":
        env = gymnasium.make_vec(
            spec_field(spec, "name"),
            num_envs=num_envs,
            vectorization_mode="vector_entry_point",
            **dict(spec_field(spec, "config") or {}),
        )
        if is_atari_id(spec_field(spec, "name")):
            env = FoldedSeeds(env)
    else:
        factory = make_env_factory(spec, extra_wrappers)
        env_fns = [factory] * num_envs
        if mode == "sync":
            env = SyncVectorEnv(env_fns, autoreset_mode=AUTORESET_MODE)
        else:
            env = ChunkedAsyncVectorEnv(env_fns, autoreset_mode=AUTORESET_MODE,
                                        name=spec_field(spec, "name") or spec_field(spec, "entrypoint"))
    reported = env.metadata.get("autoreset_mode")
    if reported != AUTORESET_MODE:
        env.close()
        raise RuntimeError(
            f"Vector env for '{spec_field(spec, 'name')}' uses autoreset mode {reported!r}; "
            f"this package requires {AUTORESET_MODE!r}."
        )
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        env.single_action_space.seed(seed)
    return env
