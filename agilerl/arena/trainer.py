"""``ArenaTrainer``: train a manifest on an Arena server instead of on this machine.

It is a :class:`~agilerl.training.trainer.Trainer` taking the same sections as
``LocalTrainer`` (algorithm, environment, training, mutation, selection, replay buffer,
network), validates them with the light Arena models, and submits them. It imports neither
torch nor gymnasium.

>>> trainer = ArenaTrainer.from_manifest(manifest="configs/training/dqn.yaml")
>>> ack = trainer.train(project="demo", experiment_name="dqn-1")
>>> final = trainer.train(project="demo", wait=True)   # blocks until the job ends
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from agilerl.arena.client import ArenaClient
from agilerl.arena.payload import manifest_payload
from agilerl.training.trainer import Trainer

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject, JsonValue

__all__ = ["ArenaTrainer", "check_environment"]

_SECTIONS = ("training", "mutation", "replay_buffer")


def _as_dict(value: object, what: str) -> dict[str, object] | None:
    """A section given as a spec model or a mapping, as a plain dict.

    A spec object contributes the fields that were set on it: Arena fills in its own
    defaults, and a local spec's other fields would only be ignored there.
    """
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    section = getattr(value, "to_section", None)  # local network specs
    if callable(section):
        return dict(section())
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dict(dump(mode="json", exclude_unset=True, exclude_none=True))
    raise TypeError(f"{what} must be a spec object or a mapping, not {type(value).__name__}")


def _algorithm_section(algorithm: object) -> dict[str, object]:
    """``{"name": ..., **fields}`` for a spec object or a mapping."""
    section = _as_dict(algorithm, "algorithm") or {}
    if "name" not in section and not isinstance(algorithm, Mapping):
        name = getattr(algorithm, "algo_name", "") or type(algorithm).__name__.removesuffix("Spec")
        section = {"name": name, **section}
    return section


def _check_registered(name: str) -> None:
    from agilerl.arena.models import ARENA_REGISTRY

    if name not in ARENA_REGISTRY:
        known = ", ".join(sorted(ARENA_REGISTRY))
        raise KeyError(f"Unknown algorithm '{name}' for Arena; choose one of: {known}")


def check_environment(client: ArenaClient, environment: Mapping[str, object]) -> None:
    """Refuse to submit when the server cannot run the environment the manifest names.

    It must be registered there (a built-in id, or one of the user's uploads); an upload
    must have passed validation (the named ``version``, else the newest). Sections with an
    ``entrypoint`` name code the job imports itself and are left to the server.

    :raises ArenaEnvironmentNotFoundError: when the server does not know the name.
    :raises ArenaValidationError: when the upload has not passed validation.
    """
    from agilerl.arena.errors import ArenaEnvironmentNotFoundError, ArenaValidationError

    name = environment.get("name")
    version = cast("str | None", environment.get("version"))  # EnvSpec.version
    if not isinstance(name, str) or not name or environment.get("entrypoint"):
        return
    shown = f"'{name}'" + (f" version '{version}'" if version else "")
    command = f"arena env validate {name} --source DIR" + (f" --version {version}"
                                                             if version else "")
    if not client.environment_exists(name, version):
        raise ArenaEnvironmentNotFoundError(
            f"Environment {shown} is not registered on {client.base_url}.",
            sdk_hint=f"Register and validate it with client.validate_environment({name!r},"
            " source=DIR), or use a built-in id (client.list_environments(include_arena=True)).",
            cli_hint=f"Register and validate it with: {command}",
        )
    uploaded = client.list_environments(name=name).get(name)
    if not isinstance(uploaded, Mapping) or not uploaded:
        return  # a built-in environment of that server
    chosen = version or list(uploaded)[-1]
    state = uploaded.get(chosen)
    if not (isinstance(state, Mapping) and state.get("validated")):
        raise ArenaValidationError(
            f"Environment '{name}' version '{chosen}' has not passed validation on"
            f" {client.base_url}; jobs cannot use it yet.",
            sdk_hint=f"Validate it with client.validate_environment({name!r},"
            f" version={chosen!r}) and fix what it reports.",
            cli_hint=f"Validate it with: arena env validate {name} --version {chosen}",
        )


def _is_multi_frequency(selection: object) -> bool:
    strategy = selection.get("strategy") if isinstance(selection, Mapping) else \
        getattr(selection, "strategy", None)
    return "MultiFrequency" in type(selection).__name__ or strategy not in (None, "tournament")


class ArenaTrainer(Trainer):
    """Submit training to Arena (hosted, or self-hosted with ``ARENA_BASE_URL``).

    A :class:`~agilerl.training.trainer.Trainer` like ``LocalTrainer``: the specs are kept as
    given on ``algorithm_spec``, ``env_spec``, ``training_spec``, ``mutation_spec``,
    ``selection_strategy_spec`` and ``replay_buffer_spec``; :meth:`to_manifest` turns them
    into the Arena payload, validated with the light Arena models.

    :param algorithm: An algorithm spec (local or Arena), a registry name (``"DQN"``) or a
        mapping.
    :param environment: An Arena ``EnvSpec``, a mapping, or a name (``"CartPole-v1"``).
    :param training: Training budget and schedule (spec or mapping).
    :param client: The :class:`ArenaClient` to use (default: a new one).
    :param api_key: API key for the new client (default ``ARENA_API_KEY`` / stored login).
    :param mutation: Mutation settings.
    :param selection_strategy: Tournament selection settings (MF-PBT is refused).
    :param replay_buffer: Replay buffer settings.
    :param kwargs: ``network`` (a network section or spec), or the deprecated
        ``tournament`` / ``tournament_selection`` aliases of ``selection_strategy``.
    """

    def __init__(
        self,
        algorithm: object,
        environment: object,
        training: object = None,
        *,
        client: ArenaClient | None = None,
        api_key: str | None = None,
        mutation: object = None,
        selection_strategy: object = None,
        replay_buffer: object = None,
        **kwargs: object,
    ) -> None:
        legacy = kwargs.pop("tournament_selection", None)
        network = kwargs.pop("network", None)
        if legacy is not None:
            warnings.warn(
                "The 'tournament_selection' argument is deprecated; use selection_strategy.",
                DeprecationWarning,
                stacklevel=2,
            )
            if selection_strategy is not None and _as_dict(legacy, "x") != _as_dict(
                selection_strategy, "x"
            ):
                raise ValueError("conflicting selection strategies given")
            selection_strategy = selection_strategy or legacy
        if isinstance(algorithm, str):
            _check_registered(algorithm)
        super().__init__(algorithm, environment, training, mutation, selection_strategy,
                         replay_buffer, **kwargs)
        if _is_multi_frequency(self.selection_strategy_spec):
            raise ValueError(
                "ArenaTrainer only supports tournament selection; multi-frequency selection "
                "(MF-PBT) runs with LocalTrainer."
            )
        #: a ``network`` section sent as the manifest's ``network`` (the server resolves the
        #: architecture); None: the algorithm spec's ``net_config``, if any.
        self.network = _as_dict(network, "network")
        self._client = client if client is not None else ArenaClient(api_key=api_key)

    def _resolve_env_spec(self, environment: object) -> object:
        """A name becomes an Arena ``EnvSpec``; specs and mappings are kept as given."""
        if isinstance(environment, str):
            from agilerl.arena.models import EnvSpec

            return EnvSpec(name=environment)
        return environment

    @property
    def client(self) -> ArenaClient:
        """The client jobs are submitted with."""
        return self._client

    def __repr__(self) -> str:
        algorithm = _algorithm_section(self.algorithm_spec).get("name")
        environment = (_as_dict(self.env_spec, "environment") or {}).get("name")
        return (f"ArenaTrainer(algorithm={algorithm!r}, environment={environment!r}, "
                f"client={self._client!r})")

    @classmethod
    def from_manifest(  # type: ignore[override]
        cls,
        manifest: str | os.PathLike[str] | Mapping[str, object],
        client: ArenaClient | None = None,
        api_key: str | None = None,
    ) -> ArenaTrainer:
        """Build a trainer from a manifest file or mapping (validated with the Arena models).

        :raises TypeError: for a core (local) ``TrainingManifest`` object.
        :raises ValueError: for an invalid manifest (every problem is listed).
        """
        from agilerl.arena.models import TrainingManifest

        if not isinstance(manifest, (str, os.PathLike, Mapping)):
            raise TypeError(
                "ArenaTrainer.from_manifest expects a serialized manifest (a path or a "
                f"dict), not {type(manifest).__name__}."
            )
        source = Path(manifest) if isinstance(manifest, (str, os.PathLike)) else dict(manifest)
        validated = TrainingManifest.get_validated(source, mode="python")
        environment = validated.environment
        if not getattr(environment, "name", None):
            raise ValueError("Environment name is required in the manifest's environment section.")
        return cls(
            validated.algorithm,
            environment,
            validated.training,
            client=client,
            api_key=api_key,
            mutation=validated.mutation,
            selection_strategy=validated.selection_strategy,
            replay_buffer=validated.replay_buffer,
            network=validated.network or None,
        )

    def to_manifest(self) -> JsonObject:
        """The validated Arena payload (selection under ``tournament_selection``)."""
        algorithm = _algorithm_section(self.algorithm_spec)
        net_config = algorithm.pop("net_config", None)
        if net_config is None and not isinstance(self.algorithm_spec, Mapping):
            # spec objects leave net_config out of their dumps: send it as `network`
            net_config = _as_dict(getattr(self.algorithm_spec, "net_config", None), "net_config")
        raw: dict[str, object] = {"algorithm": algorithm,
                               "environment": _as_dict(self.env_spec, "environment") or {}}
        for name in _SECTIONS:
            section = _as_dict(getattr(self, f"{name}_spec"), name)
            if section is not None:
                raw[name] = section
        selection = _as_dict(self.selection_strategy_spec, "selection_strategy")
        if selection is not None:
            raw["tournament_selection"] = selection
        network = self.network or net_config
        if network:
            raw["network"] = network
        payload = manifest_payload(raw)
        for key in ("mutation", "tournament_selection", "network"):
            payload.setdefault(key, {})
        return payload

    def train(
        self,
        resource_id: str | int | None = None,
        num_nodes: int | None = None,
        project: str | None = None,
        experiment_name: str | None = None,
        reward_file: str | os.PathLike[str] | bytes | None = None,
        completion: str | None = None,
        *,
        wait: bool = False,
        poll_interval: float = 5.0,
        timeout: float | None = None,
    ) -> JsonObject:
        """Submit the job; return the acknowledgement, or with ``wait=True`` its final status.

        The environment is checked first (:func:`check_environment`): it must be a
        built-in id of that server or an upload that passed validation there.

        :param wait: Block until the job is COMPLETED, FAILED or STOPPED and return that
            status row (needs a server with the status endpoint, e.g. ``arena-server``).
        :param poll_interval: Longest pause between status checks while waiting.
        :param timeout: Give up waiting after this many seconds.
        """
        manifest = self.to_manifest()
        check_environment(self._client, cast("JsonObject", manifest.get("environment") or {}))
        ack = self._client.submit_experiment(
            manifest,
            resource_id=resource_id,
            num_nodes=num_nodes,
            project=project,
            experiment_name=experiment_name,
            reward_file=reward_file,
            completion=completion,
        )
        if not wait:
            return ack
        name = str(ack.get("experiment_name") or experiment_name or "")
        if not name:
            raise ValueError("The server did not name the experiment; pass experiment_name=.")
        return self._client.wait_for_experiment(
            name,
            poll_interval=poll_interval,
            timeout=timeout,
            project=cast("str | None", ack.get("project")) or project,  # the server's answer
        )

    def resume_from_checkpoint(self, job_id: str, max_steps: int) -> JsonValue:
        """Continue experiment *job_id* from its latest checkpoint up to *max_steps*."""
        return self._client.resume_experiment(job_id, max_steps)

    def list_experiments(self, project: str | None = None) -> list[JsonObject]:
        """The experiments of *project* (default: the default project)."""
        return self._client.list_experiments(project)

    def list_checkpoints(self, job_id: str) -> list[JsonObject]:
        """The checkpoints of experiment *job_id*."""
        return self._client.list_checkpoints(job_id)
