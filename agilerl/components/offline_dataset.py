"""A fixed dataset of transitions for offline RL, read from an HDF5 file or a Minari dataset.

Sources:

* **HDF5** (``environment.dataset_path``), the flat layout the reference reads:
  ``observations`` (N, *obs_shape), ``actions`` (N,) or (N, 1), ``rewards`` (N,),
  ``terminals`` (N,), and optionally ``next_observations`` (N, *obs_shape) and the episode
  ends ``timeouts`` or ``episode_terminals`` (N,). Without ``next_observations`` the next
  observation of row ``i`` is row ``i + 1``; a row that ends an episode without a terminal
  (a time limit) has no next observation and is left out, so no transition joins two
  episodes (the reference pairs every row with the next one, across episodes too).
* **Minari** (``environment.minari_dataset_id``), read from the local data root
  (``MINARI_DATASETS_PATH``, default ``~/.minari/datasets``) one episode at a time.

The file is read in chunks of :data:`CHUNK_ROWS` rows and checked as it goes: missing
keys, row counts that disagree, shapes that do not match the evaluation env's spaces,
actions outside a discrete action space, NaN or infinite values, an empty or non-HDF5 file
all raise :class:`DatasetError` naming the file and the key before training starts.

Storage: every transition of the file is kept (the reference keeps only the last
``replay_buffer.max_size``). When the dataset has at most ``in_memory_rows`` transitions
(the replay buffer's share of memory, ``replay_buffer.max_size``) it lives in RAM;
otherwise it is streamed into memory-mapped files in a temporary folder (removed by
:meth:`OfflineDataset.close` or when the dataset is garbage-collected), so a dataset larger
than memory trains at the speed of the page cache. Observations are stored once: a
transition holds the row of its observation and of its next observation.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import torch
from gymnasium import spaces
from numpy.typing import DTypeLike

from agilerl.core.value_types import Space
from agilerl.input_files import file_problem

if TYPE_CHECKING:
    import h5py
    from minari import MinariDataset

__all__ = ["CHUNK_ROWS", "DatasetError", "DatasetFiles", "OfflineDataset",
           "load_offline_dataset"]

#: Rows read from the file at a time (bounded memory while loading).
CHUNK_ROWS = 65_536
REQUIRED_KEYS = ("observations", "actions", "rewards", "terminals")
EPISODE_END_KEYS = ("timeouts", "episode_terminals")


class DatasetState(TypedDict):
    """What a checkpoint records of the dataset a run trained on (never the data)."""

    kind: str
    source: str
    transitions: int
    fingerprint: str


class DatasetError(ValueError):
    """An offline dataset cannot be trained on; the message names the file and the key."""


@dataclass
class _Chunk:
    """One block of rows of a source, in the storage's terms."""

    observations: np.ndarray  # rows appended to the observation store
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    obs_rows: np.ndarray  # per transition, relative to this chunk's first stored row
    next_rows: np.ndarray


#: Storage file (in the dataset's folder, ``NAME.npy``) -> attribute holding its array.
_STORES = {"observations": "_obs", "obs_rows": "_obs_row", "next_rows": "_next_row",
           "actions": "_action", "rewards": "_reward", "dones": "_done"}


class OfflineDataset:
    """Transitions ``{obs, action, reward, next_obs, done}`` sampled uniformly.

    Build it with :func:`load_offline_dataset`; ``done`` is the terminal flag (targets
    bootstrap through time limits).
    """

    read_only = True
    """Training never writes to it: worker processes share it as it is (see
    :meth:`worker_handle`), with no per-member journal."""

    def __init__(self, source: str, observation_rows: int, transitions: int,
                 observation_shape: tuple[int, ...], in_memory: bool) -> None:
        self.source = source
        self.in_memory = in_memory
        self._folder: str | None = None
        if not in_memory:
            self._folder = tempfile.mkdtemp(prefix="agilerl-offline-")
            weakref.finalize(self, shutil.rmtree, self._folder, True)
        self._obs = self._array("observations", (observation_rows, *observation_shape),
                                np.float32)
        self._obs_row = self._array("obs_rows", (transitions,), np.int64)
        self._next_row = self._array("next_rows", (transitions,), np.int64)
        self._action = self._array("actions", (transitions,), np.int64)
        self._reward = self._array("rewards", (transitions,), np.float32)
        self._done = self._array("dones", (transitions,), np.float32)
        self.size = 0
        self._obs_filled = 0
        self._tensor_views: dict[str, torch.Tensor] | None = None
        self._views_size = -1

    def _array(self, name: str, shape: tuple[int, ...], dtype: DTypeLike) -> np.ndarray:
        if self._folder is None:
            return np.empty(shape, dtype=dtype)
        if not shape[0]:
            return np.empty(shape, dtype=dtype)
        return np.lib.format.open_memmap(os.path.join(self._folder, f"{name}.npy"),
                                         mode="w+", dtype=dtype, shape=shape)

    def _append(self, chunk: _Chunk) -> None:
        first, n_obs = self._obs_filled, len(chunk.observations)
        self._obs[first:first + n_obs] = chunk.observations
        self._obs_filled += n_obs
        start, n = self.size, len(chunk.actions)
        end = start + n
        self._obs_row[start:end] = chunk.obs_rows + first
        self._next_row[start:end] = chunk.next_rows + first
        self._action[start:end] = chunk.actions
        self._reward[start:end] = chunk.rewards
        self._done[start:end] = chunk.dones
        self.size = end

    def __len__(self) -> int:
        return self.size

    @property
    def observation_shape(self) -> tuple[int, ...]:
        """The shape of one observation."""
        return tuple(self._obs.shape[1:])

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        """``batch_size`` transitions drawn uniformly with replacement with ``rng``, as CPU
        tensors (one index draw, then one gather per field and one for both observations)."""
        return self.rows(torch.from_numpy(rng.integers(0, self.size, size=int(batch_size))))

    def batches(self, batch_size: int, count: int, rng: np.random.Generator
                ) -> list[dict[str, torch.Tensor]]:
        """``count`` batches as :meth:`sample` draws them, made with one index draw and
        one gather per field for all of them (each batch holds views of those)."""
        batch_size = int(batch_size)
        index = torch.from_numpy(rng.integers(0, self.size, size=int(count) * batch_size))
        split = {key: value.split(batch_size) for key, value in self.rows(index).items()}
        return [dict(zip(split, batch, strict=True)) for batch in zip(*split.values(), strict=True)]

    def rows(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The transitions at ``index`` (an int64 tensor): ``{obs, action, reward, next_obs,
        done}``, gathered from tensor views of the storage (no copy of the dataset)."""
        views = self._views()
        rows = len(index)
        both = torch.cat([views["obs_rows"].index_select(0, index),
                          views["next_rows"].index_select(0, index)])
        obs = views["observations"].index_select(0, both)
        return {
            "obs": obs[:rows],
            "action": views["actions"].index_select(0, index),
            "reward": views["rewards"].index_select(0, index),
            "next_obs": obs[rows:],
            "done": views["dones"].index_select(0, index),
        }

    def _views(self) -> dict[str, torch.Tensor]:
        """Tensors sharing the arrays' memory (RAM or the memory-mapped files), made once
        the dataset is loaded."""
        views = self._tensor_views
        if views is None or self._views_size != self.size:
            arrays = {"observations": self._obs[: self._obs_filled],
                      "obs_rows": self._obs_row[: self.size],
                      "next_rows": self._next_row[: self.size],
                      "actions": self._action[: self.size],
                      "rewards": self._reward[: self.size],
                      "dones": self._done[: self.size]}
            with warnings.catch_warnings():  # a read-only memory map: never written through
                warnings.simplefilter("ignore", UserWarning)
                views = {k: torch.from_numpy(v) for k, v in arrays.items()}
            self._tensor_views, self._views_size = views, self.size
        return views

    def __getstate__(self) -> dict[str, object]:
        # The tensor views share the arrays' memory; a copy rebuilds them on first use
        # rather than carrying the data twice.
        return {**self.__dict__, "_tensor_views": None, "_views_size": -1}

    def fingerprint(self) -> str:
        """A short digest of the stored transitions (to check a resumed run's dataset)."""
        digest = hashlib.sha256()
        for array in (self._action[: self.size], self._reward[: self.size],
                      self._done[: self.size]):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()[:16]

    # A checkpoint records which dataset the run trained on, never the data itself.
    def state_dict(self) -> DatasetState:
        return {"kind": "offline_dataset", "source": self.source, "transitions": self.size,
                "fingerprint": self.fingerprint()}

    def load_state_dict(self, state: DatasetState) -> None:
        """Check that ``state`` (a checkpoint's) was written for this very dataset."""
        if state.get("kind") != "offline_dataset":
            raise ValueError("the checkpoint's replay memory is not an offline dataset")
        if (int(state["transitions"]), state["fingerprint"]) != (self.size, self.fingerprint()):
            raise ValueError(f"the run was trained on a different dataset ({state['source']}, "
                             f"{state['transitions']} transitions) than {self.source} "
                             f"({self.size} transitions)")

    def worker_handle(self) -> DatasetFiles:
        """A small picklable reference that opens this dataset read-only, memory-mapped, in
        another process on this machine, so nothing large crosses the process boundary
        and every process reads the same page cache. An in-memory dataset is moved to
        files first (this process then reads them too); the files live as long as this
        dataset."""
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="agilerl-offline-")
            weakref.finalize(self, shutil.rmtree, self._folder, True)
            self.in_memory = False
        for name, attribute in _STORES.items():
            path = os.path.join(self._folder, f"{name}.npy")
            if not os.path.exists(path):  # in memory until now (or an empty store)
                np.save(path, getattr(self, attribute))
                setattr(self, attribute, np.load(path, mmap_mode="r"))
        return DatasetFiles(source=self.source, folder=self._folder, size=self.size,
                            observations=self._obs_filled)

    def close(self) -> None:
        """Drop the memory-mapped files (if any)."""
        folder, self._folder = self._folder, None
        if folder is not None:
            self._tensor_views = None
            self._obs = self._obs_row = self._next_row = np.empty(0)
            self._action = self._reward = self._done = np.empty(0)
            shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class DatasetFiles:
    """The files of an :class:`OfflineDataset` (:meth:`OfflineDataset.worker_handle`)."""

    source: str
    folder: str
    size: int
    observations: int

    def open_here(self) -> OfflineDataset:
        """The dataset, its stores memory-mapped read-only (this process does not own the
        files: the dataset that wrote them removes them)."""
        dataset = OfflineDataset.__new__(OfflineDataset)
        dataset.source, dataset.in_memory, dataset._folder = self.source, False, None
        for name, attribute in _STORES.items():
            setattr(dataset, attribute,
                    np.load(os.path.join(self.folder, f"{name}.npy"), mmap_mode="r"))
        dataset.size, dataset._obs_filled = self.size, self.observations
        dataset._tensor_views, dataset._views_size = None, -1  # made on first sample
        return dataset


# ---------------------------------------------------------------------------- loading
def load_offline_dataset(
    spec: object, observation_space: Space, action_space: Space,
    in_memory_rows: int,
) -> OfflineDataset:
    """The dataset named by an ``OfflineEnvSpec`` (``dataset_path`` or
    ``minari_dataset_id``), checked against the evaluation env's spaces."""
    if not isinstance(observation_space, spaces.Box):
        raise DatasetError(f"offline datasets need a Box observation space; the environment "
                           f"{getattr(spec, 'name', '')!r} observes {observation_space}")
    check = _SpaceCheck(observation_space, action_space)
    path = getattr(spec, "dataset_path", None)
    if path:
        return _from_hdf5(Path(path), check, in_memory_rows)
    dataset_id = getattr(spec, "minari_dataset_id", None)
    if dataset_id:
        return _from_minari(str(dataset_id), bool(getattr(spec, "remote", False)), check,
                            in_memory_rows)
    raise DatasetError("the offline environment needs dataset_path or minari_dataset_id")


class _SpaceCheck:
    """Checks rows of a source against the evaluation env's spaces (errors name the key)."""

    def __init__(self, observation_space: spaces.Box, action_space: Space) -> None:
        self.obs_shape = tuple(observation_space.shape)
        self.action_space = action_space

    def observations(self, where: str, key: str, rows: np.ndarray,
                     offset: int = 0) -> np.ndarray:
        if tuple(rows.shape[1:]) != self.obs_shape:
            raise DatasetError(f"{where}: key '{key}' holds observations of shape "
                               f"{tuple(rows.shape[1:])}; the environment observes "
                               f"{self.obs_shape}")
        return _finite(where, key, rows.astype(np.float32, copy=False), offset)

    def actions(self, where: str, key: str, rows: np.ndarray, offset: int = 0) -> np.ndarray:
        space = self.action_space
        if not isinstance(space, spaces.Discrete):
            raise DatasetError(f"{where}: offline training here needs a Discrete action space "
                               f"(CQN); the environment's is {space}")
        if rows.ndim == 2 and rows.shape[1] == 1:
            rows = rows[:, 0]
        if rows.ndim != 1:
            raise DatasetError(f"{where}: key '{key}' holds actions of shape "
                               f"{tuple(rows.shape[1:])}; a Discrete action is one integer")
        rows = _finite(where, key, rows, offset)
        as_int = rows.astype(np.int64)
        bad = np.flatnonzero((as_int != rows) | (as_int < space.start)
                             | (as_int >= space.start + space.n))
        if bad.size:
            raise DatasetError(f"{where}: key '{key}' holds {rows[bad[0]].item()!r} (row "
                               f"{offset + int(bad[0])}), "
                               f"outside the environment's action space {space}")
        return as_int - int(space.start)


def _finite(where: str, key: str, rows: np.ndarray, offset: int = 0) -> np.ndarray:
    if rows.dtype.kind == "f" and not np.isfinite(rows).all():
        row = int(np.flatnonzero(~np.isfinite(rows.reshape(len(rows), -1)).all(axis=1))[0])
        raise DatasetError(f"{where}: key '{key}' holds NaN or infinite values "
                           f"(first at row {offset + row})")
    if rows.dtype.kind not in "fiub":
        raise DatasetError(f"{where}: key '{key}' holds {rows.dtype} values, not numbers")
    return rows


def _flags(where: str, key: str, rows: np.ndarray, offset: int = 0) -> np.ndarray:
    return _finite(where, key, np.asarray(rows).reshape(len(rows), -1)[:, 0], offset) != 0


# ---------------------------------------------------------------------------- HDF5
def _h5py() -> ModuleType:
    try:
        import h5py
    except ImportError as exc:
        raise ImportError("reading offline datasets needs h5py: "
                          "pip install 'agilerl[offline]'", name="h5py") from exc
    return h5py


def _open_hdf5(path: Path) -> h5py.File:
    h5py = _h5py()
    where = f"dataset_path '{path}'"
    problem = file_problem(path)
    if problem is not None:
        raise DatasetError(f"{where}: {problem}")
    if path.stat().st_size == 0:
        raise DatasetError(f"{where}: the file is empty")
    if not h5py.is_hdf5(path):
        raise DatasetError(f"{where}: not an HDF5 file (expected the keys "
                           f"{', '.join(REQUIRED_KEYS)})")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise DatasetError(f"{where}: cannot be read as HDF5 ({exc})") from None


def _from_hdf5(path: Path, check: _SpaceCheck, in_memory_rows: int) -> OfflineDataset:
    where = f"dataset_path '{path}'"
    with _open_hdf5(path) as handle:
        keys = _dataset_keys(handle)
        missing = [k for k in REQUIRED_KEYS if k not in keys]
        if missing:
            raise DatasetError(f"{where}: missing key{'s' if len(missing) > 1 else ''} "
                               f"{', '.join(repr(k) for k in missing)} (found: "
                               f"{', '.join(sorted(keys)) or 'no datasets'})")
        rows = _row_count(handle, where, keys)
        if rows == 0:
            raise DatasetError(f"{where}: key 'observations' has no rows")
        explicit_next = "next_observations" in keys
        chunks = -(-rows // CHUNK_ROWS)
        # Derived next observations: each chunk also stores the next chunk's first row.
        stored = 2 * rows if explicit_next else rows + chunks - 1
        dataset = OfflineDataset(str(path), stored, rows, check.obs_shape,
                                 in_memory=rows <= in_memory_rows)
        end_key = next((k for k in EPISODE_END_KEYS if k in keys), None)
        for start in range(0, rows, CHUNK_ROWS):
            stop = min(start + CHUNK_ROWS, rows)
            dataset._append(_hdf5_chunk(handle, where, check, start, stop, rows, end_key,
                                        explicit_next))
    return _non_empty(dataset, where)


def _dataset_keys(handle: h5py.Group) -> set[str]:
    h5py = _h5py()
    return {k for k in handle if isinstance(handle[k], h5py.Dataset)}


def _row_count(handle: h5py.Group, where: str, keys: set[str]) -> int:
    rows = int(handle["observations"].shape[0]) if handle["observations"].shape else 0
    for key in (*REQUIRED_KEYS, "next_observations", *EPISODE_END_KEYS):
        if key in keys:
            shape = handle[key].shape
            if not shape or int(shape[0]) != rows:
                raise DatasetError(f"{where}: key '{key}' has "
                                   f"{int(shape[0]) if shape else 0} rows, 'observations' "
                                   f"has {rows}")
    return rows


def _hdf5_chunk(handle: h5py.Group, where: str, check: _SpaceCheck, start: int, stop: int,
                rows: int, end_key: str | None, explicit_next: bool) -> _Chunk:
    def read(key: str) -> np.ndarray:
        return np.asarray(handle[key][start:stop])

    obs = check.observations(where, "observations", read("observations"), start)
    actions = check.actions(where, "actions", read("actions"), start)
    rewards = _finite(where, "rewards",
                      read("rewards").reshape(stop - start, -1)[:, 0].astype(np.float32), start)
    terminals = _flags(where, "terminals", read("terminals"), start)
    index = np.arange(stop - start)
    if explicit_next:
        next_obs = check.observations(where, "next_observations", read("next_observations"),
                                      start)
        return _Chunk(np.concatenate([obs, next_obs]), actions, rewards,
                      terminals.astype(np.float32), index, index + len(obs))
    ends = terminals.copy()
    if end_key is not None:
        ends |= _flags(where, end_key, read(end_key), start)
    if stop == rows:  # the last row has no next row: it must end its episode
        ends[-1] = True
    # A chunk also holds the first row of the next one, so row i's next row is i + 1.
    if stop < rows:
        extra = check.observations(where, "observations",
                                   np.asarray(handle["observations"][stop:stop + 1]), stop)
        obs = np.concatenate([obs, extra])
    keep = terminals | ~ends
    next_rows = np.where(terminals, index, index + 1)
    # The extra row is stored again as the next chunk's first row; that duplicate costs one
    # observation per chunk and keeps every chunk self-contained.
    return _Chunk(obs, actions[keep], rewards[keep], terminals[keep].astype(np.float32),
                  index[keep], next_rows[keep])


def _non_empty(dataset: OfflineDataset, where: str) -> OfflineDataset:
    if len(dataset) == 0:
        dataset.close()
        raise DatasetError(f"{where}: no usable transitions (every row ends an episode "
                           "without a terminal flag and there is no 'next_observations')")
    return dataset


# ---------------------------------------------------------------------------- Minari
def _minari_root() -> str:
    return os.environ.get("MINARI_DATASETS_PATH") or os.path.join("~", ".minari", "datasets")


def _from_minari(dataset_id: str, remote: bool, check: _SpaceCheck,
                 in_memory_rows: int) -> OfflineDataset:
    where = f"minari_dataset_id '{dataset_id}'"
    try:
        import minari
    except ImportError as exc:
        raise ImportError("reading Minari datasets needs minari: "
                          "pip install 'agilerl[offline]'", name="minari") from exc
    try:
        source = minari.load_dataset(dataset_id, download=remote)
    except FileNotFoundError:
        raise DatasetError(
            f"{where}: not found in the local Minari data root {_minari_root()} "
            "(MINARI_DATASETS_PATH); nothing is downloaded unless asked: fetch it once with "
            f"`minari download {dataset_id}`, or set environment.remote: true, or point "
            "environment.dataset_path at an HDF5 file") from None
    except Exception as exc:  # a broken local copy: name it rather than fail deep inside
        raise DatasetError(f"{where}: cannot be loaded from {_minari_root()} "
                           f"({type(exc).__name__}: {exc})") from None
    steps, episodes = int(source.total_steps), int(source.total_episodes)
    if steps == 0:
        raise DatasetError(f"{where}: the dataset holds no steps")
    dataset = OfflineDataset(f"minari:{dataset_id}", steps + episodes, steps, check.obs_shape,
                             in_memory=steps <= in_memory_rows)
    for chunk in _minari_chunks(source, where, check):
        dataset._append(chunk)
    return _non_empty(dataset, where)


def _minari_chunks(source: MinariDataset, where: str, check: _SpaceCheck) -> Iterator[_Chunk]:
    for episode in source.iterate_episodes():
        label = f"{where} episode {episode.id}"
        observations = episode.observations
        if isinstance(observations, Mapping | tuple):
            raise DatasetError(f"{label}: key 'observations' is a {type(observations).__name__}"
                               " of arrays; offline training here reads flat (Box) "
                               "observations")
        obs = check.observations(label, "observations", np.asarray(observations))
        actions = check.actions(label, "actions", np.asarray(episode.actions))
        steps = len(actions)
        if len(obs) != steps + 1:
            raise DatasetError(f"{label}: key 'observations' has {len(obs)} rows for "
                               f"{steps} actions (a Minari episode stores one more)")
        rewards = _finite(label, "rewards", np.asarray(episode.rewards, dtype=np.float32))
        terminals = _flags(label, "terminations", np.asarray(episode.terminations))
        index = np.arange(steps)
        yield _Chunk(obs, actions, rewards.reshape(-1), terminals.astype(np.float32), index,
                     index + 1)
