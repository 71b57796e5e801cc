"""Offline datasets: the HDF5 and Minari readers, their checks, and memory-mapped storage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from gymnasium import spaces

from agilerl.components import offline_dataset
from agilerl.components.offline_dataset import DatasetError, load_offline_dataset

h5py = pytest.importorskip("h5py")

OBS = spaces.Box(-np.inf, np.inf, (4,), np.float32)
ACT = spaces.Discrete(2)
REPO = Path(__file__).resolve().parents[2]


def write_h5(path: Path, rows: int = 10, **override: object) -> Path:
    """A flat HDF5 dataset with two episodes: one ends by a terminal (row 4), one by a
    time limit (the last row); ``observations[i] = i``."""
    data: dict[str, object] = {
        "observations": np.repeat(np.arange(rows, dtype=np.float32)[:, None], 4, axis=1),
        "actions": np.arange(rows) % 2,
        "rewards": np.ones(rows, dtype=np.float32),
        "terminals": (np.arange(rows) == 4).astype(np.float32),
        "timeouts": (np.arange(rows) == rows - 1).astype(np.float32),
    }
    data.update(override)
    with h5py.File(path, "w") as handle:
        for key, value in data.items():
            if value is not None:
                handle[key] = value
    return path


def load(path: Path, in_memory_rows: int = 10_000, obs=OBS, act=ACT):
    return load_offline_dataset(SimpleNamespace(dataset_path=str(path), name="CartPole-v1"),
                                obs, act, in_memory_rows)


def all_transitions(dataset) -> dict[str, np.ndarray]:
    """Every stored transition in order (sampling with an index-returning generator)."""
    class Counting:
        def integers(self, low, high, size):
            return np.arange(high)
    return dataset.sample(len(dataset), Counting())


def test_next_observations_are_derived_within_episodes_only(tmp_path: Path) -> None:
    data = all_transitions(load(write_h5(tmp_path / "d.h5")))
    # Row 9 ends by a time limit without a next observation: left out. Row 4 is terminal.
    np.testing.assert_array_equal(data["obs"][:, 0], np.arange(9))
    np.testing.assert_array_equal(data["next_obs"][:, 0], [1, 2, 3, 4, 4, 6, 7, 8, 9])
    np.testing.assert_array_equal(data["done"], (np.arange(9) == 4).astype(np.float32))
    np.testing.assert_array_equal(data["action"], np.arange(9) % 2)


def test_explicit_next_observations_are_used(tmp_path: Path) -> None:
    rows = 6
    next_obs = np.full((rows, 4), 7.0, dtype=np.float32)
    data = all_transitions(load(write_h5(tmp_path / "d.h5", rows=rows,
                                         next_observations=next_obs)))
    assert len(data["obs"]) == rows
    assert (data["next_obs"] == 7.0).all()


def test_a_dataset_larger_than_the_buffer_share_is_memory_mapped(tmp_path: Path,
                                                                monkeypatch) -> None:
    monkeypatch.setattr(offline_dataset, "CHUNK_ROWS", 7)  # several chunks, as a big file
    rows = 50
    path = write_h5(tmp_path / "d.h5", rows=rows)
    in_ram, mapped = load(path), load(path, in_memory_rows=20)
    assert in_ram.in_memory and not mapped.in_memory
    assert isinstance(mapped._obs, np.memmap)
    a, b = all_transitions(in_ram), all_transitions(mapped)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_array_equal(a["next_obs"][:, 0] - a["obs"][:, 0],
                                  np.where(a["done"] == 1, 0, 1))
    assert len(mapped) == rows - 1  # every row but the timed-out last one, past max_size
    folder = mapped._folder
    mapped.close()
    assert folder is not None and not os.path.exists(folder)


@pytest.mark.parametrize(("override", "needle"), [
    ({"rewards": None}, "missing key 'rewards'"),
    ({"actions": np.zeros(9, dtype=np.int64)}, "key 'actions' has 9 rows, 'observations' has 10"),
    ({"observations": np.zeros((10, 3), dtype=np.float32)},
     "key 'observations' holds observations of shape (3,); the environment observes (4,)"),
    ({"rewards": np.r_[np.ones(5), np.nan, np.ones(4)].astype(np.float32)},
     "key 'rewards' holds NaN or infinite values (first at row 5)"),
    ({"actions": np.full(10, 2)}, "key 'actions' holds 2 (row 0), outside"),
    ({"actions": np.zeros((10, 2))}, "key 'actions' holds actions of shape (2,)"),
])
def test_bad_datasets_name_the_file_and_the_key(tmp_path: Path, override, needle) -> None:
    path = write_h5(tmp_path / "bad.h5", **override)
    with pytest.raises(DatasetError) as info:
        load(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def test_empty_missing_and_non_hdf5_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.h5"
    empty.touch()
    text = tmp_path / "notes.h5"
    text.write_text("observations,actions\n1,2\n")
    for path, needle in ((empty, "the file is empty"), (text, "not an HDF5 file"),
                         (tmp_path / "absent.h5", "does not exist")):
        with pytest.raises(DatasetError, match=needle):
            load(path)


def test_a_minari_id_that_is_not_local_says_how_to_get_it(tmp_path: Path,
                                                         monkeypatch) -> None:
    pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    spec = SimpleNamespace(dataset_path=None, minari_dataset_id="cartpole/expert-v0",
                           remote=False, name="CartPole-v1")
    with pytest.raises(DatasetError) as info:
        load_offline_dataset(spec, OBS, ACT, 100)
    message = str(info.value)
    assert "minari_dataset_id 'cartpole/expert-v0'" in message and str(tmp_path) in message
    assert "minari download cartpole/expert-v0" in message


def test_a_local_minari_dataset_is_read_episode_by_episode(tmp_path: Path) -> None:
    pytest.importorskip("minari")
    from tests.peer.test_peer_offline_bandit_train import write_minari_cartpole

    previous = os.environ.get("MINARI_DATASETS_PATH")
    try:
        write_minari_cartpole(tmp_path, "cartpole/tiny-v0", episodes=3)
        spec = SimpleNamespace(dataset_path=None, minari_dataset_id="cartpole/tiny-v0",
                               remote=False, name="CartPole-v1")
        import minari

        source = minari.load_dataset("cartpole/tiny-v0")
        dataset = load_offline_dataset(spec, OBS, ACT, 10_000)
    finally:
        if previous is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = previous
    episode = next(iter(source.iterate_episodes()))
    data = all_transitions(dataset)
    assert len(dataset) == source.total_steps
    steps = len(episode.actions)
    np.testing.assert_array_equal(data["obs"][:steps], episode.observations[:-1])
    np.testing.assert_array_equal(data["next_obs"][:steps], episode.observations[1:])
    assert data["done"][steps - 1] == float(episode.terminations[-1])


def test_the_cli_reports_a_bad_dataset_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    bad = write_h5(tmp_path / "bad.h5", terminals=None)
    manifest = tmp_path / "cqn.yaml"
    manifest.write_text(
        "algorithm: {name: CQN}\n"
        f"environment: {{name: CartPole-v1, num_envs: 1, dataset_path: {bad}}}\n"
        "training: {max_steps: 10, evo_steps: 10, pop_size: 1}\n")
    done = subprocess.run([sys.executable, "-m", "agilerl.train", str(manifest), "--no-verbose"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stderr
    assert "missing key 'terminals'" in done.stderr and str(bad) in done.stderr
    assert "Traceback" not in done.stderr


def test_samples_are_tensor_gathers_and_a_pickled_copy_samples_the_same(tmp_path: Path) -> None:
    import pickle

    import torch

    dataset = load(write_h5(tmp_path / "d.h5"))
    first = dataset.sample(6, np.random.default_rng(3))
    assert all(isinstance(v, torch.Tensor) for v in first.values())
    copy = pickle.loads(pickle.dumps(dataset))
    again = copy.sample(6, np.random.default_rng(3))
    for key, value in first.items():
        torch.testing.assert_close(again[key], value)


def test_batches_drawn_ahead_are_the_same_as_one_draw_and_stop_at_the_total(
        tmp_path: Path, monkeypatch) -> None:
    from agilerl.training import offline

    dataset = load(write_h5(tmp_path / "d.h5", rows=40))
    rng, again = np.random.default_rng(3), np.random.default_rng(3)
    expected = dataset.batches(8, 5, again)
    index = np.random.default_rng(3).integers(0, len(dataset), size=40)
    every = all_transitions(dataset)
    for k, batch in enumerate(expected):  # batch k holds the k-th block of one index draw
        rows = index[8 * k: 8 * (k + 1)]
        for key in ("obs", "action", "reward", "next_obs", "done"):
            np.testing.assert_array_equal(batch[key].numpy(), every[key][rows].numpy())

    monkeypatch.setattr(offline, "PREFETCH_BATCHES", 2)  # chunks of 2, 2 and 1 batches
    ahead = offline.PrefetchedBatches(dataset, 5)
    drawn = [ahead.sample(8, rng) for _ in range(5)]
    first_chunk = dataset.batches(8, 2, np.random.default_rng(3))
    for got, want in zip(drawn[:2], first_chunk, strict=True):
        for key in got:
            np.testing.assert_array_equal(got[key].numpy(), want[key].numpy())
    # Nothing is drawn beyond the 5 batches asked for.
    reference = np.random.default_rng(3)
    for count in (2, 2, 1):
        dataset.batches(8, count, reference)
    assert rng.bit_generator.state == reference.bit_generator.state


def test_batches_drawn_ahead_of_a_large_observation_stay_small(tmp_path: Path,
                                                                monkeypatch) -> None:
    from agilerl.training import offline

    dataset = load(write_h5(tmp_path / "d.h5", rows=40))
    counts: list[int] = []
    original = type(dataset).batches

    def batches(self, batch_size, count, rng):  # type: ignore[no-untyped-def]
        counts.append(count)
        return original(self, batch_size, count, rng)

    monkeypatch.setattr(type(dataset), "batches", batches)
    monkeypatch.setattr(offline, "PREFETCH_ELEMENTS", 11 * 8 * 3)  # 11 per row (2 x 4 + 3)
    ahead = offline.PrefetchedBatches(dataset, 7)
    for _ in range(7):
        ahead.sample(8, np.random.default_rng(0))
    assert counts == [3, 3, 1]
