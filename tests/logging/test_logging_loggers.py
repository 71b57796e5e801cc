"""CSV, TensorBoard, W&B (offline) and composite loggers."""

from __future__ import annotations

import csv
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agilerl.logging import (
    CompositeLogger,
    CSVLogger,
    MetricsLogger,
    TensorBoardLogger,
    make_run_loggers,
    tensorboard_run_dir,
    wandb_run_name,
)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_csv_rows_and_new_columns(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path / "run")
    logger.log(
        {"eval/mean_fitness": 1.5, "train/global_step": 100, "train/agent_0/lr": np.float32(0.5)}
    )
    logger.log({"train/global_step": 200, "eval/mean_fitness": 2.5, "train/agent_0/lr": 0.25})
    # a metric appearing in a later generation widens the file; older rows get blanks
    logger.log({"train/global_step": 300, "eval/mean_fitness": 3.0, "train/agent_1/score": 7})
    logger.close()
    path = tmp_path / "run" / "metrics.csv"
    header = path.read_text().splitlines()[0].split(",")
    assert header == [
        "train/global_step",
        "eval/mean_fitness",
        "train/agent_0/lr",
        "train/agent_1/score",
    ]
    rows = _rows(path)
    assert [r["train/global_step"] for r in rows] == ["100", "200", "300"]
    assert [r["eval/mean_fitness"] for r in rows] == ["1.5", "2.5", "3.0"]
    assert rows[0]["train/agent_0/lr"] == "0.5" and rows[2]["train/agent_0/lr"] == ""
    assert rows[2]["train/agent_1/score"] == "7" and rows[0]["train/agent_1/score"] == ""


def test_csv_step_argument_and_text_values(tmp_path: Path) -> None:
    with CSVLogger(tmp_path / "m.csv") as logger:
        logger.log({"train/agent_0/activation": "ReLU", "eval/best_fitness": float("nan")}, step=5)
    rows = _rows(tmp_path / "m.csv")
    assert rows == [
        {"train/global_step": "5", "train/agent_0/activation": "ReLU", "eval/best_fitness": "nan"}
    ]


def test_csv_append_resumes_and_fresh_run_overwrites(tmp_path: Path) -> None:
    with CSVLogger(tmp_path) as logger:
        logger.log({"train/global_step": 1, "a": 1})
    with CSVLogger(tmp_path, append=True) as logger:
        logger.log({"train/global_step": 2, "a": 2})
    assert [r["a"] for r in _rows(tmp_path / "metrics.csv")] == ["1", "2"]
    with CSVLogger(tmp_path) as logger:
        logger.log({"train/global_step": 3, "a": 3})
    assert [r["a"] for r in _rows(tmp_path / "metrics.csv")] == ["3"]


def _scalars(event_file: Path) -> dict[str, list[tuple[int, float]]]:
    """Read scalar summaries back from a TFRecord event file."""
    from tensorboardX.proto import event_pb2

    data = event_file.read_bytes()
    out: dict[str, list[tuple[int, float]]] = {}
    offset = 0
    while offset < len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        record = data[offset + 12 : offset + 12 + length]
        offset += 12 + length + 4
        event = event_pb2.Event.FromString(record)
        for value in event.summary.value:
            if value.HasField("simple_value"):
                out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


def test_tensorboard_event_file(tmp_path: Path) -> None:
    logger = TensorBoardLogger(
        "DQN",
        "CartPole-v1",
        log_dir=tmp_path,
        timestamp="T0",
        config={"algorithm": {"name": "DQN"}},
    )
    assert logger.run_dir == tmp_path / "DQN-CartPole-v1-T0"
    logger.log(
        {"train/global_step": 100, "eval/mean_fitness": 9.5, "train/agent_0/activation": "ReLU"}
    )
    logger.log({"eval/mean_fitness": 12.0, "eval/best_fitness": float("nan")}, step=200)
    logger.close()
    logger.close()  # idempotent
    (event_file,) = list(logger.run_dir.glob("events.out.tfevents.*"))
    scalars = _scalars(event_file)
    assert scalars["eval/mean_fitness"] == [(100, 9.5), (200, 12.0)]
    assert "train/agent_0/activation" not in scalars
    assert "eval/best_fitness" not in scalars


def test_tensorboard_dir_name_sanitised(tmp_path: Path) -> None:
    assert tensorboard_run_dir(tmp_path, "PPO", "ALE/Pong-v5", "T").name == "PPO-ALE_Pong-v5-T"
    assert tensorboard_run_dir(None, "PPO", "X", "T") == Path("tensorboard_logs/PPO-X-T")


def test_wandb_run_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WANDB_NAME", raising=False)
    assert wandb_run_name("DQN", "CartPole-v1", "T") == "CartPole-v1-EvoHPO-DQN-T"
    monkeypatch.setenv("WANDB_NAME", "mine")
    assert wandb_run_name("DQN", "CartPole-v1", "T") == "mine"


def test_wandb_offline_run_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.delenv("WANDB_NAME", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    loggers = make_run_loggers(
        algo="DQN",
        env_name="CartPole-v1",
        csv_path=tmp_path / "run",
        wb=True,
        init_hp={"algorithm": {"name": "DQN", "lr": 0.001}},
        wandb_kwargs={"addl_args": {"tags": ["t1"]}},
        timestamp="T1",
    )
    loggers.log({"train/global_step": 64, "eval/mean_fitness": 21.5, "train/agent_0/lr": 0.001})
    loggers.close()
    (run_file,) = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    content = run_file.read_bytes()
    assert b"CartPole-v1-EvoHPO-DQN-T1" in content
    assert b"AgileRL" in content
    assert b"eval/mean_fitness" in content
    assert (tmp_path / "run" / "metrics.csv").is_file()


class _Recorder(MetricsLogger):
    def __init__(self, fail_close: bool = False):
        self.seen: list[tuple[dict[str, Any], int | None]] = []
        self.closed = False
        self.fail_close = fail_close

    def log(self, metrics: Any, step: int | None = None) -> None:
        self.seen.append((dict(metrics), step))

    def close(self) -> None:
        self.closed = True
        if self.fail_close:
            raise OSError("disk gone")


def test_composite_fans_out_and_closes_all() -> None:
    first, second = _Recorder(fail_close=True), _Recorder()
    composite = CompositeLogger([first, second])
    composite.log({"x": 1}, step=3)
    assert first.seen == second.seen == [({"x": 1}, 3)]
    with pytest.raises(OSError, match="disk gone"):
        composite.close()
    assert first.closed and second.closed


def test_make_run_loggers_empty() -> None:
    loggers = make_run_loggers(algo="DQN", env_name="CartPole-v1")
    assert loggers.loggers == []
    loggers.log({"train/global_step": 1})
    loggers.close()


def test_csv_append_drops_rows_after_the_resumed_step(tmp_path):
    """A run resumed from a checkpoint at step 200 logs steps after 200 again: the kept file
    holds each step once."""
    from agilerl.logging.csv_logger import CSVLogger

    first = CSVLogger(tmp_path)
    for step in (100, 200, 300, 400):
        first.log({"eval/best_fitness": step / 10}, step=step)
    first.close()
    resumed = CSVLogger(tmp_path, append=True, keep_until_step=200)
    for step in (300, 400):
        resumed.log({"eval/best_fitness": step / 10}, step=step)
    resumed.close()
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["100", "200", "300", "400"]
