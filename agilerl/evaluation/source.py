"""What ``agilerl evaluate RUN_OR_ELITE`` evaluates: an agent, and the manifest of its run.

``RUN_OR_ELITE`` may be

* an agent file (``elite.pt``, or any ``agent.save_checkpoint`` file): that agent; the
  manifest is the ``manifest.yaml`` beside it, when there is one (a run folder's elite);
* a checkpoint folder (``checkpoints/gen00003-step0000015000``): its elite member (the
  checkpoint's ``elite_member``, else the member with the best last fitness), or
  ``member``; the manifest is the one the checkpoint holds;
* a folder of checkpoints (``checkpoints/``): its newest checkpoint, as above;
* a checkpoint archive (``.tar.gz``, an Arena download): the checkpoint it holds, as above;
* a run folder (``agilerl train``'s ``--run-dir``): whichever of its ``elite.pt`` and its
  newest checkpoint was written last (they agree at the end of a run), with the run's
  ``manifest.yaml``.

Every problem is a :class:`SourceError` whose message names the path and says what to pass.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from agilerl.checkpoint import Checkpoint, CheckpointError, find_checkpoint
from agilerl.checkpoint.archive import is_archive, unpacked_checkpoint
from agilerl.checkpoint.layout import INDEX_NAME, RUN_CHECKPOINTS
from agilerl.core.value_types import JsonObject
from agilerl.run_folder import ELITE_FILE
from agilerl.run_folder import MANIFEST_FILE as RUN_MANIFEST

if TYPE_CHECKING:
    from agilerl.algorithms.core.base import RLAlgorithm


class SourceError(ValueError):
    """``RUN_OR_ELITE`` is not something an agent can be loaded from (message says why)."""


@dataclass
class Source:
    """A loaded agent and where it came from."""

    agent: RLAlgorithm
    manifest: JsonObject | None
    """The run's resolved manifest (a mapping), when one was found."""
    manifest_path: Path | None
    description: str
    """Which agent this is, for the user: ``elite (member 1) of checkpoint ...``."""
    member: int | None = None
    """The member's index in its checkpoint (None for an agent file)."""


def load_source(path: str | os.PathLike[str], member: int | None = None,
                device: str = "cpu") -> Source:
    """The agent ``path`` names (see the module docstring), loaded for inference."""
    target = Path(path)
    if not target.exists():
        raise SourceError(f"{target} does not exist (expected a run folder, a checkpoint "
                          "folder or an agent file such as elite.pt)")
    if is_archive(target):
        return _archived(target, member, device)
    if target.is_file():
        if member is not None:
            raise SourceError(f"--member picks a member of a checkpoint; {target} is an agent "
                              "file, which holds one agent")
        return _agent_file(target, device)
    elite = target / ELITE_FILE
    if elite.is_file() and member is None and not (target / INDEX_NAME).exists() \
            and _newer_than_checkpoints(elite, target):
        return _agent_file(elite, device)
    if (target / RUN_MANIFEST).is_file() and not elite.is_file() \
            and not (target / RUN_CHECKPOINTS).is_dir():
        raise SourceError(f"run folder {target} holds no agent: the run saved neither an elite "
                          "nor a checkpoint (train with --save-elite or --checkpoint-steps N)")
    try:
        checkpoint = find_checkpoint(target)
    except CheckpointError as exc:
        raise SourceError(f"{exc}; pass a run folder, a checkpoint folder or an agent file "
                          "(elite.pt)") from None
    return _checkpoint_member(checkpoint, member, device, _run_manifest(target))


def _archived(path: Path, member: int | None, device: str) -> Source:
    """A checkpoint archive (an Arena download): unpacked, loaded, removed again."""
    try:
        with unpacked_checkpoint(path) as folder:
            source = _checkpoint_member(find_checkpoint(folder), member, device, None)
    except CheckpointError as exc:
        raise SourceError(str(exc)) from None
    source.manifest_path = None  # its folder is gone; the manifest is kept in memory
    source.description = source.description.replace(str(folder), f"{folder.name} in {path}")
    return source


def _newer_than_checkpoints(elite: Path, run: Path) -> bool:
    """Whether ``elite`` was written after every checkpoint of the run folder ``run``."""
    folder = run / RUN_CHECKPOINTS
    indexes = list(folder.glob(f"*/{INDEX_NAME}")) if folder.is_dir() else []
    return all(elite.stat().st_mtime >= index.stat().st_mtime for index in indexes)


def _run_manifest(folder: Path) -> Path | None:
    """The ``manifest.yaml`` of the run ``folder`` belongs to (the run folder, or the run
    folder of a checkpoint or of its checkpoints folder)."""
    for candidate in (folder, folder.parent, folder.parent.parent):
        if (candidate / RUN_MANIFEST).is_file():
            return candidate / RUN_MANIFEST
    return None


def _agent_file(path: Path, device: str) -> Source:
    from agilerl.checkpoint.folder import load_state_file

    try:
        state = load_state_file(path, f"agent file {path}")
    except CheckpointError as exc:
        raise SourceError(str(exc)) from None
    if not isinstance(state, dict) or "algo" not in state:
        raise SourceError(f"{path} is not an agilerl agent file (expected a file written by "
                          "--save-elite or agent.save_checkpoint)")
    agent = _restore(state, device, f"agent file {path}")
    beside = path.parent / RUN_MANIFEST
    manifest_path = beside if beside.is_file() else None
    return Source(agent, _read_yaml(manifest_path), manifest_path,
                  f"{agent.algo} agent from {path}")


def _checkpoint_member(checkpoint: Checkpoint, member: int | None, device: str,
                       run_manifest: Path | None) -> Source:
    if member is not None and member >= checkpoint.pop_size:
        raise SourceError(f"--member {member}: checkpoint {checkpoint.path} holds members "
                          f"0 to {checkpoint.pop_size - 1}")
    try:
        chosen, why = (member, "member") if member is not None else _elite(checkpoint)
        state = checkpoint.member_state(chosen)
        manifest = checkpoint.manifest()
    except CheckpointError as exc:
        raise SourceError(str(exc)) from None
    agent = _restore(state, device, f"checkpoint {checkpoint.path}: member {chosen}")
    label = f"member {chosen}" if why == "member" else f"{why} (member {chosen})"
    path = checkpoint.path / "manifest.json" if manifest is not None else run_manifest
    if manifest is None:
        manifest = _read_yaml(run_manifest)
    return Source(agent, manifest, path,
                  f"{agent.algo} {label} of checkpoint {checkpoint.path}", member=chosen)


def _elite(checkpoint: Checkpoint) -> tuple[int, str]:
    """The member to evaluate when none was asked for, and how it was chosen."""
    elite = checkpoint.summary.get("elite_member")
    if isinstance(elite, int) and not isinstance(elite, bool) \
            and 0 <= elite < checkpoint.pop_size:
        return elite, "elite"
    best, best_fitness = 0, -math.inf
    for index in range(checkpoint.pop_size):
        saved = cast(Iterable[object], checkpoint.member_state(index).get("fitness", []))
        fitness = [f for f in saved if isinstance(f, int | float) and math.isfinite(f)]
        if fitness and fitness[-1] > best_fitness:
            best, best_fitness = index, fitness[-1]
    return best, ("best last fitness" if math.isfinite(best_fitness)
                  else "first member (no fitness recorded yet)")


def _restore(state: Mapping[str, object], device: str, what: str) -> RLAlgorithm:
    from agilerl.algorithms import NotImplementedAlgorithmError, algorithm_class
    from agilerl.algorithms.core.base import RLAlgorithm

    try:
        cls = algorithm_class(str(state["algo"]))
    except NotImplementedAlgorithmError:
        raise SourceError(f"{what} holds a {state['algo']} agent, which this version of "
                          "agilerl does not implement") from None
    if not issubclass(cls, RLAlgorithm):
        raise SourceError(f"{what} holds a {state['algo']} model: evaluate plays RL agents "
                          "in their environment, not language models")
    try:
        agent = cls.from_state(state, device=device)
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        raise SourceError(f"{what} cannot be restored ({type(exc).__name__}: {exc})") from None
    agent.inference = True  # loaded to act (see MemberState.load)
    return agent


def _read_yaml(path: Path | None) -> JsonObject | None:
    if path is None:
        return None
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SourceError(f"{path} cannot be read ({exc})") from None
    if not isinstance(data, dict):
        raise SourceError(f"{path} is not a manifest (a mapping of sections)")
    return data
