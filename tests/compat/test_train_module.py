"""``agilerl.train`` as the reference exposes it: ``parse_args`` and ``main``, with its
defaults; the verbosity levels of a run started from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import agilerl.train as train_mod
from agilerl.cli.train import verbosity

from .conftest import tiny


def test_module_exposes_main_and_parse_args() -> None:
    assert callable(train_mod.main) and callable(train_mod.parse_args)
    assert set(train_mod.__all__) >= {"main", "parse_args"}


def test_parse_args_reads_sys_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["train", "config.yaml", "-d", "cuda:1"])
    args = train_mod.parse_args()
    assert args.manifest == Path("config.yaml") and args.device == "cuda:1"


@pytest.mark.parametrize(("argv", "name", "value"), [
    (["--use-accelerator"], "use_accelerator", True),
    (["--wb"], "wb", True),
    (["--wandb-api-key", "key123"], "wandb_api_key", "key123"),
    (["--checkpoint-steps", "50"], "checkpoint_steps", 50),
    (["--checkpoint-path", "/tmp/ckpt"], "checkpoint_path", "/tmp/ckpt"),
    (["--overwrite-checkpoints"], "overwrite_checkpoints", True),
    (["--resume-from-checkpoint", "/ckpt"], "resume_from_checkpoint", "/ckpt"),
    (["--save-elite"], "save_elite", True),
    (["--elite-path", "/elite"], "elite_path", "/elite"),
    (["--tensorboard"], "tensorboard", True),
    (["--no-tensorboard"], "tensorboard", False),
    (["--tensorboard-log-dir", "/logs"], "tensorboard_log_dir", "/logs"),
    (["--no-verbose"], "verbose", False),
    (["--verbose"], "verbose", True),
])
def test_parse_args_flags(argv: list[str], name: str, value: object) -> None:
    assert getattr(train_mod.parse_args(["m.yaml", *argv]), name) == value


def test_parse_args_defaults_match_the_reference() -> None:
    args = train_mod.parse_args(["m.yaml"])
    assert args.use_accelerator is False and args.wb is False
    assert args.wandb_api_key is None
    assert args.checkpoint_steps is None and args.checkpoint_path is None
    assert args.overwrite_checkpoints is False
    assert args.resume_from_checkpoint is None
    assert args.save_elite is False and args.elite_path is None
    assert args.tensorboard is False and args.tensorboard_log_dir == "tensorboard_logs"
    assert args.verbose is True


@pytest.mark.parametrize(("argv", "level"), [
    ([], 1), (["--verbose"], 2), (["--no-verbose"], 0), (["--verbose", "--no-verbose"], 0),
])
def test_verbosity_levels(argv: list[str], level: int) -> None:
    assert verbosity(train_mod.parse_args(["m.yaml", *argv])) == level


def _manifest(tmp_path: Path, **training: object) -> Path:
    data = tiny(training=training)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_main_default_prints_one_line_per_generation(tmp_path, capsys) -> None:
    path = _manifest(tmp_path)
    assert train_mod.main([str(path), "--seed", "1", "--run-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    generation_lines = [ln for ln in out.splitlines() if ln.startswith("steps ")]
    assert len(generation_lines) >= 3  # three generations of 200 steps per agent
    assert "(600 x 2 agents," in generation_lines[-1]
    assert "Global steps" not in out  # no per-agent tables
    assert "budget: 600 steps x 2 agents" in out


def test_main_verbose_flag_prints_generation_tables(tmp_path, capsys) -> None:
    path = _manifest(tmp_path)
    assert train_mod.main([str(path), "--verbose", "--seed", "1",
                           "--run-dir", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().out.count("Global steps") == 3


@pytest.mark.parametrize(("flag", "kept"), [([], 1), (["--overwrite-checkpoints"], 1)])
def test_manifest_overwrite_checkpoints_holds_without_the_flag(tmp_path, flag, kept) -> None:
    # The flag defaults to False like the reference's, yet without it the manifest decides.
    path = _manifest(tmp_path, checkpoint_steps=400, overwrite_checkpoints=True)
    ck = tmp_path / "ck"
    assert train_mod.main([str(path), "--no-verbose", "--seed", "1", "--checkpoint-path",
                           str(ck), "--run-dir", str(tmp_path / "run"), *flag]) == 0
    assert len([p for p in ck.iterdir() if p.is_dir()]) == kept
