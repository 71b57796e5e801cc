"""Environment checks that need Gymnasium's registry or spaces: unregistered ids, algorithms
used with an action space they cannot act in, replay buffers larger than memory; and
``validate`` and ``train`` agree on each."""

from __future__ import annotations

from pathlib import Path

import pytest

from agilerl.cli.main import main
from agilerl.models import budget, env_checks
from agilerl.models.validation import validate_path


def _write(tmp_path: Path, algorithm: str, env: str, extra: str = "") -> Path:
    file = tmp_path / "m.yaml"
    file.write_text(f"algorithm:\n  name: {algorithm}\nenvironment:\n  name: {env}\n{extra}")
    return file


def _errors(file: Path) -> list[str]:
    return [f"{i.path}@{i.location.line if i.location else None}: {i.message}"
            for i in validate_path(file).errors]


def _train_refuses(file: Path, capsys: pytest.CaptureFixture[str], fragment: str) -> None:
    assert main(["train", str(file), "--no-verbose"]) == 1
    err = capsys.readouterr().err
    assert fragment in err and "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize(("algorithm", "env", "fragment"), [
    ("DQN", "Pendulum-v1", "DQN needs a Discrete action space, but 'Pendulum-v1' has "
     "continuous actions"),
    ("RainbowDQN", "MountainCarContinuous-v0", "RainbowDQN needs a Discrete action space"),
    ("TD3", "CartPole-v1", "TD3 needs a Box action space, but 'CartPole-v1' has discrete"),
    ("DDPG", "Acrobot-v1", "algorithms that can: DQN, PPO, RainbowDQN"),
])
def test_an_algorithm_is_named_with_an_action_space_it_cannot_handle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], algorithm: str, env: str,
        fragment: str) -> None:
    file = _write(tmp_path, algorithm, env)
    (error,) = _errors(file)
    assert error.startswith("environment.name@4: ") and fragment in error
    _train_refuses(file, capsys, fragment)


@pytest.mark.parametrize(("algorithm", "env"), [("PPO", "Pendulum-v1"), ("PPO", "CartPole-v1"),
                                                ("DQN", "CartPole-v1"), ("TD3", "Pendulum-v1")])
def test_supported_action_spaces_pass(tmp_path: Path, algorithm: str, env: str) -> None:
    assert _errors(_write(tmp_path, algorithm, env)) == []


def test_an_unregistered_id_is_an_error_for_validate_and_train(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = _write(tmp_path, "DQN", "MyOwnEnv-v0")
    (error,) = _errors(file)
    assert "environment.name@4: 'MyOwnEnv-v0' is not a registered Gymnasium id" in error
    assert "environment.entrypoint" in error
    _train_refuses(file, capsys, "'MyOwnEnv-v0' is not a registered Gymnasium id")


def test_a_namespace_without_its_package_warns_for_validate_and_stops_train(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if env_checks.importlib.util.find_spec("ale_py") is not None:
        pytest.skip("ale-py is installed here")
    file = _write(tmp_path, "PPO", "ALE/Breakout-v5")
    report = validate_path(file)
    assert report.ok and "pip install 'agilerl[atari]'" in report.warnings[0].message
    _train_refuses(file, capsys, "agilerl[atari]")


@pytest.mark.parametrize(("env_id", "severity", "fragment"), [
    ("not_installed_pkg:Thing-v0", "error", "'not_installed_pkg', which is not installed"),
    ("gymnasium:Thing-v0", "warning", "registered when 'gymnasium' is imported"),
    ("Nowhere/Thing-v0", "error", "namespace 'Nowhere' is not registered"),
])
def test_package_references_and_namespaces(env_id: str, severity: str, fragment: str) -> None:
    finding = env_checks.check_gym_id(env_id)
    assert finding is not None and finding.severity == severity and fragment in finding.message


def test_a_replay_buffer_larger_than_memory_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "machine_memory_bytes", lambda: 1 << 30)  # 1 GiB
    file = _write(tmp_path, "DQN", "CartPole-v1", "replay_buffer:\n  max_size: 50000000\n")
    (error,) = _errors(file)
    assert error.startswith("replay_buffer.max_size@6: a replay buffer of 50,000,000 "
                            "transitions needs about 2.3 GiB (49 bytes each: CartPole-v1's "
                            "observations are 4 float32 values); this machine has 1.0 GiB")
    _train_refuses(file, capsys, "replay_buffer.max_size")
    fits = _write(tmp_path, "DQN", "CartPole-v1", "replay_buffer:\n  max_size: 1000000\n")
    assert _errors(fits) == []


def test_a_ppo_rollout_larger_than_memory_is_refused(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "machine_memory_bytes", lambda: 1 << 30)  # 1 GiB
    file = tmp_path / "m.yaml"
    file.write_text("algorithm:\n  name: PPO\n  learn_step: 50000000\nenvironment:\n"
                    "  name: CartPole-v1\n")
    (error,) = _errors(file)
    assert error.startswith("algorithm.learn_step@3: a rollout (learn_step) of 50,000,000 "
                            "transitions needs about 2.5 GiB (53 bytes each")
    file.write_text("algorithm:\n  name: PPO\n  learn_step: 2048\nenvironment:\n"
                    "  name: CartPole-v1\n")
    assert _errors(file) == []


def test_without_known_spaces_the_buffer_floor_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    finding = budget.check_replay_memory(10**9, None, None, memory=1 << 30)
    assert finding is not None and "at least 25 bytes each" in finding.message
    assert budget.check_replay_memory(10**6, None, None, memory=1 << 30) is None
