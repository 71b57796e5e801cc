"""``agilerl evaluate``: a tiny run's elite, checkpoint or archive played in a plain env;
clear refusals (exit 2, no traceback) for what cannot be evaluated as asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from agilerl.cli.main import main

REPO = Path(__file__).resolve().parents[2]
NET = {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
       "head_config": {"hidden_size": [16]}}
TINY_DQN = {
    "algorithm": {"name": "DQN", "batch_size": 32, "learn_step": 4},
    "environment": {"name": "CartPole-v1", "num_envs": 2},
    "network": NET,
    "replay_buffer": {"max_size": 2000},
    "training": {"max_steps": 300, "evo_steps": 100, "pop_size": 2, "eval_loop": 1,
                 "eval_steps": 50},
}
TINY_MADDPG = {
    "algorithm": {"name": "MADDPG", "batch_size": 16, "learn_step": 4},
    "environment": {"name": "agilerl.envs.multi_agent_probe", "num_envs": 2,
                    "config": {"episode_length": 5, "early_exit": True}},
    "network": NET,
    "replay_buffer": {"max_size": 2000},
    "training": {"max_steps": 160, "evo_steps": 80, "pop_size": 2, "eval_loop": 1,
                 "learning_delay": 20},
}


def agilerl(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "agilerl.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=180)


def evaluate(capsys, *args: object) -> tuple[int, str, str]:
    """``agilerl evaluate ARGS`` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    status = main(["evaluate", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def _train(manifest: dict, folder: Path, *, in_process: bool) -> Path:
    """A run folder with an elite.pt and a checkpoint per generation."""
    path = folder / "manifest.in.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    run = folder / "run"
    argv = ["train", str(path), "--no-verbose", "--seed", "1", "--run-dir", str(run),
            "--save-elite", "--checkpoint-steps", str(manifest["training"]["evo_steps"])]
    if in_process:
        assert main(argv) == 0
    else:
        done = agilerl(*argv, cwd=folder)
        assert done.returncode == 0, done.stderr
    return run


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory) -> Path:
    return _train(TINY_DQN, tmp_path_factory.mktemp("dqn"), in_process=False)


@pytest.fixture(scope="module")
def maddpg_run(tmp_path_factory) -> Path:
    return _train(TINY_MADDPG, tmp_path_factory.mktemp("maddpg"), in_process=True)


def _returns(stdout: str) -> list[float]:
    return [float(line.split("return ")[1].split(",")[0])
            for line in stdout.splitlines() if line.startswith("episode ")]


def test_evaluate_a_run_prints_returns(dqn_run) -> None:
    """``agilerl train`` then ``agilerl evaluate RUN`` in subprocesses, as a user runs them."""
    done = agilerl("evaluate", dqn_run, "--episodes", 3, cwd=dqn_run)
    assert done.returncode == 0, done.stderr
    returns = _returns(done.stdout)
    assert len(returns) == 3 and all(r >= 1 for r in returns)  # CartPole: 1 per step
    assert "mean return" in done.stdout and "±" in done.stdout
    assert "DQN agent from" in done.stdout and "elite.pt" in done.stdout


def test_a_checkpoint_plays_its_elite_and_json_lists_the_episodes(dqn_run, capsys) -> None:
    checkpoint = sorted((dqn_run / "checkpoints").iterdir())[-1]
    elite = json.loads((checkpoint / "index.json").read_text())["summary"]["elite_member"]
    status, out, err = evaluate(capsys, checkpoint, "--episodes", 2, "--json")
    assert status == 0, err
    payload = json.loads(out)
    assert payload["member"] == elite and f"elite (member {elite})" in payload["source"]
    assert len(payload["episodes"]) == 2
    assert payload["mean_return"] == pytest.approx(
        sum(e["return"] for e in payload["episodes"]) / 2)
    # the same seed plays the same episodes; --member picks another member
    again = json.loads(evaluate(capsys, checkpoint, "--episodes", 2, "--json")[1])
    assert again["episodes"] == payload["episodes"]
    other = json.loads(evaluate(capsys, checkpoint, "--member", 1 - elite, "--json",
                                "--episodes", 1)[1])
    assert other["member"] == 1 - elite


def test_an_archived_checkpoint_is_evaluated(dqn_run, tmp_path, capsys) -> None:
    checkpoint = sorted((dqn_run / "checkpoints").iterdir())[-1]
    archive = tmp_path / "download.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(checkpoint, arcname=checkpoint.name)
    status, out, err = evaluate(capsys, archive, "--episodes", 1, "--json")
    assert status == 0, err
    direct = evaluate(capsys, checkpoint, "--episodes", 1, "--json")[1]
    assert json.loads(out)["episodes"] == json.loads(direct)["episodes"]


def test_a_multi_agent_checkpoint_plays_a_plain_pettingzoo_env(maddpg_run, capsys) -> None:
    checkpoint = sorted((maddpg_run / "checkpoints").iterdir())[-1]
    status, out, err = evaluate(capsys, checkpoint, "--episodes", 3, "--json")
    assert status == 0, err
    payload = json.loads(out)
    assert payload["algorithm"] == "MADDPG" and len(payload["episodes"]) == 3
    for episode in payload["episodes"]:
        assert episode["length"] == 5  # episode_length steps; seeker_1 leaves halfway
        assert set(episode["agent_returns"]) == {"seeker_0", "seeker_1", "pointer_0"}
        assert episode["return"] == pytest.approx(sum(episode["agent_returns"].values()))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["{tmp}/missing"], "does not exist"),
        (["{tmp}"], "is not a checkpoint"),
        (["{run}", "--render", "sideways"], "invalid choice"),
        (["{run}", "--render", "human", "--record", "{tmp}/v.mp4"], "rgb_array"),
        (["{run}", "training.pop_size=3"], "only the environment section"),
        (["{run}", "environment.name=Acrobot-v1"], "observation space"),
        (["{run}", "--member", "7"], "holds members 0 to 1"),
    ],
    ids=["missing", "no-checkpoint", "bad-render", "record-human", "override", "other-env",
         "member"],
)
def test_refusals_exit_two_without_traceback(dqn_run, tmp_path, args, needle, capsys) -> None:
    argv = [a.format(tmp=tmp_path, run=dqn_run) for a in args]
    try:
        status, _, err = evaluate(capsys, *argv)
    except SystemExit as exc:  # argparse's own usage errors
        status, err = int(exc.code or 0), capsys.readouterr().err
    assert status == 2, err
    assert needle in err and "Traceback" not in err


def test_a_run_that_saved_no_agent_says_how_to_save_one(tmp_path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.yaml").write_text("algorithm: {name: DQN}\n")
    (run / "metrics.csv").write_text("train/global_step\n")
    status, _, err = evaluate(capsys, run)
    assert status == 2
    assert "saved neither an elite nor a checkpoint" in err and "--save-elite" in err


def test_a_render_mode_the_env_lacks_is_refused(maddpg_run, capsys) -> None:
    status, _, err = evaluate(capsys, maddpg_run, "--render", "rgb_array")
    assert status == 2 and "cannot render" in err


def test_record_without_a_video_writer_names_the_extra(dqn_run, tmp_path, monkeypatch,
                                                       capsys) -> None:
    monkeypatch.setattr("agilerl.evaluation.video.available_writer", lambda: None)
    status, _, err = evaluate(capsys, dqn_run, "--record", tmp_path / "v.mp4")
    assert status == 2 and "agilerl[video]" in err and not (tmp_path / "v.mp4").exists()


def test_record_writes_a_video(dqn_run, tmp_path, capsys) -> None:
    from agilerl.evaluation.video import available_writer

    if available_writer() is None:
        pytest.skip("no video writer installed (imageio-ffmpeg or OpenCV)")
    video = tmp_path / "run.mp4"
    status, out, err = evaluate(capsys, dqn_run, "--episodes", 1, "--record", video)
    assert status == 0, err
    assert video.stat().st_size > 0 and f"written to {video}" in out


def test_a_bare_agent_file_needs_an_environment(dqn_run, tmp_path, capsys) -> None:
    import shutil

    bare = tmp_path / "best.pt"
    shutil.copy(dqn_run / "elite.pt", bare)
    status, _, err = evaluate(capsys, bare)
    assert status == 2 and "environment.name=ID" in err
    status, out, err = evaluate(capsys, bare, "environment.name=CartPole-v1", "--episodes", 1,
                                "--max-steps", 3, "--json")
    assert status == 0, err
    assert json.loads(out)["episodes"][0]["length"] <= 3
