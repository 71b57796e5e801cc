"""``ArenaTrainer``: train a manifest on an Arena server instead of on this machine.

It takes the same sections as ``LocalTrainer`` (algorithm, environment, training,
mutation, selection, replay buffer, network), validates them with the light Arena
models, and submits them. It imports neither torch nor gymnasium.

>>> trainer = ArenaTrainer.from_manifest(manifest="configs/training/dqn.yaml")
>>> ack = trainer.train(project="demo", experiment_name="dqn-1")
>>> final = trainer.train(project="demo", wait=True)   # blocks until the job ends
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agilerl.arena.client import ArenaClient
from agilerl.arena.payload import manifest_payload

__all__ = ["ArenaTrainer"]

DEFAULT_NUM_ENVS = 16
_SECTIONS = ("algorithm", "environment", "training", "mutation", "replay_buffer")


def _as_dict(value: Any, what: str) -> dict[str, Any] | None:
    """A section given as a spec model or a mapping, as a plain dict."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dict(dump(mode="json", exclude_none=True))
    raise TypeError(f"{what} must be a spec object or a mapping, not {type(value).__name__}")


def _algorithm_section(algorithm: Any) -> dict[str, Any]:
    """``{"name": ..., **fields}`` for a registry name, a spec object or a mapping."""
    if isinstance(algorithm, str):
        _check_registered(algorithm)
        return {"name": algorithm}
    section = _as_dict(algorithm, "algorithm") or {}
    if "name" not in section and not isinstance(algorithm, Mapping):
        section = {"name": type(algorithm).__name__.removesuffix("Spec"), **section}
    return section


def _check_registered(name: str) -> None:
    from agilerl.arena.models import ARENA_REGISTRY

    if name not in ARENA_REGISTRY:
        known = ", ".join(sorted(ARENA_REGISTRY))
        raise KeyError(f"Unknown algorithm '{name}' for Arena; choose one of: {known}")


def _selection_section(selection: Any) -> dict[str, Any] | None:
    section = _as_dict(selection, "selection_strategy")
    if section is None:
        return None
    strategy = section.get("strategy", "tournament")
    is_mf = "MultiFrequency" in type(selection).__name__ or strategy != "tournament"
    if is_mf:
        raise ValueError(
            "ArenaTrainer only supports tournament selection; multi-frequency selection "
            "(MF-PBT) runs with LocalTrainer."
        )
    return section


class ArenaTrainer:
    """Submit training to Arena (hosted, or self-hosted with ``ARENA_BASE_URL``).

    :param algorithm: An algorithm spec, a registry name (``"DQN"``) or a mapping.
    :param environment: An environment spec, a name (``"CartPole-v1"``) or a mapping.
    :param training: Training budget and schedule (spec or mapping).
    :param client: The :class:`ArenaClient` to use (default: a new one).
    :param api_key: API key for the new client (default ``ARENA_API_KEY`` / stored login).
    :param mutation: Mutation settings.
    :param selection_strategy: Tournament selection settings (MF-PBT is refused).
    :param replay_buffer: Replay buffer settings.
    :param kwargs: Only the deprecated ``tournament_selection`` alias, or ``network``.
    """

    def __init__(
        self,
        algorithm: Any,
        environment: Any,
        training: Any = None,
        *,
        client: ArenaClient | None = None,
        api_key: str | None = None,
        mutation: Any = None,
        selection_strategy: Any = None,
        replay_buffer: Any = None,
        **kwargs: Any,
    ) -> None:
        legacy = kwargs.pop("tournament_selection", None)
        network = kwargs.pop("network", None)
        if kwargs:
            raise TypeError(f"ArenaTrainer got unexpected argument(s): {', '.join(kwargs)}")
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
        self.algorithm = _algorithm_section(algorithm)
        if isinstance(environment, str):
            environment = {"name": environment, "num_envs": DEFAULT_NUM_ENVS}
        self.environment = _as_dict(environment, "environment") or {}
        self.training = _as_dict(training, "training")
        self.mutation = _as_dict(mutation, "mutation")
        self.selection_strategy = _selection_section(selection_strategy)
        self.replay_buffer = _as_dict(replay_buffer, "replay_buffer")
        # A network given as a section, or on the algorithm, travels as the manifest's
        # `network` section; the server resolves the architecture.
        self.network = _as_dict(network, "network") or self.algorithm.pop("net_config", None)
        self.client = client if client is not None else ArenaClient(api_key=api_key)

    def __repr__(self) -> str:
        return (
            f"ArenaTrainer(algorithm={self.algorithm.get('name')!r}, "
            f"environment={self.environment.get('name')!r}, client={self.client!r})"
        )

    @classmethod
    def from_manifest(
        cls,
        manifest: str | os.PathLike[str] | Mapping[str, Any],
        client: ArenaClient | None = None,
        api_key: str | None = None,
    ) -> ArenaTrainer:
        """Build a trainer from a manifest file or mapping (validated with the Arena models).

        :raises TypeError: for a core (local) ``TrainingManifest`` object.
        :raises ValueError: for an invalid manifest (every problem is listed).
        """
        if not isinstance(manifest, (str, os.PathLike, Mapping)):
            raise TypeError(
                "ArenaTrainer.from_manifest expects a serialized manifest (a path or a "
                f"dict), not {type(manifest).__name__}."
            )
        source = Path(manifest) if isinstance(manifest, (str, os.PathLike)) else dict(manifest)
        payload = manifest_payload(source)
        environment = payload.get("environment") or {}
        if not environment.get("name"):
            raise ValueError("Environment name is required in the manifest's environment section.")
        return cls(
            payload["algorithm"],
            environment,
            payload.get("training"),
            client=client,
            api_key=api_key,
            mutation=payload.get("mutation") or None,
            selection_strategy=payload.get("tournament_selection") or None,
            replay_buffer=payload.get("replay_buffer"),
            network=payload.get("network") or None,
        )

    def to_manifest(self) -> dict[str, Any]:
        """The validated Arena payload (selection under ``tournament_selection``)."""
        raw: dict[str, Any] = {
            name: getattr(self, name) for name in _SECTIONS if getattr(self, name) is not None
        }
        if self.selection_strategy is not None:
            raw["tournament_selection"] = self.selection_strategy
        if self.network:
            raw["network"] = self.network
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
    ) -> dict[str, Any]:
        """Submit the job; return the acknowledgement, or with ``wait=True`` its final status.

        :param wait: Block until the job is COMPLETED, FAILED or STOPPED and return that
            status row (needs a server with the status endpoint, e.g. ``arena-server``).
        :param poll_interval: Longest pause between status checks while waiting.
        :param timeout: Give up waiting after this many seconds.
        """
        ack = self.client.submit_experiment(
            self.to_manifest(),
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
        return self.client.wait_for_experiment(
            name,
            poll_interval=poll_interval,
            timeout=timeout,
            project=ack.get("project") or project,
        )

    def resume_from_checkpoint(self, job_id: str, max_steps: int) -> Any:
        """Continue experiment *job_id* from its latest checkpoint up to *max_steps*."""
        return self.client.resume_experiment(job_id, max_steps)

    def list_experiments(self, project: str | None = None) -> list[dict[str, Any]]:
        """The experiments of *project* (default: the default project)."""
        return self.client.list_experiments(project)

    def list_checkpoints(self, job_id: str) -> list[dict[str, Any]]:
        """The checkpoints of experiment *job_id*."""
        return self.client.list_checkpoints(job_id)
