"""Environment specs: source rules (spec §8.3), resolution for an algorithm, delegation of
building to ``agilerl.envs`` (building itself is tested with the environments)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import agilerl.models as models
from agilerl.models import (
    ALGO_REGISTRY,
    BanditEnvSpec,
    GymEnvSpec,
    LLMEnvSpec,
    OfflineEnvSpec,
    PzEnvSpec,
    resolve_env_spec,
)


def test_llm_env_rules_by_type() -> None:
    with pytest.raises(ValidationError, match="reward_file_path is required"):
        LLMEnvSpec(env_type="reasoning", dataset="d", reward_fn_name="f", prompt_template={"user_0": "q"})
    with pytest.raises(ValidationError, match="reward_fn_name is required"):
        LLMEnvSpec(env_type="reasoning", dataset="d", reward_file_path="r.py", prompt_template={"u": 1})
    with pytest.raises(ValidationError, match="Prompt template is required"):
        LLMEnvSpec(env_type="reasoning", dataset="d", reward_file_path="r.py", reward_fn_name="f")
    pref = LLMEnvSpec(env_type="preference", dataset="d")
    assert (pref.train_test_split, pref.columns, pref.max_reward) == (0.9, None, None)
    assert not hasattr(pref, "num_envs") and pref.name == "d"
    with pytest.raises(ValidationError, match="dataset is required for SFT"):
        LLMEnvSpec(env_type="sft")
    with pytest.raises(ValidationError, match="dataset is required for preference/SFT"):
        LLMEnvSpec(env_type="preference")
    for env_type in ("sft", "preference"):
        with pytest.raises(ValidationError, match="reward_file_path"):
            LLMEnvSpec(env_type=env_type, dataset="d", reward_file_path="r.py")
    with pytest.raises(ValidationError):
        LLMEnvSpec(env_type="preference", dataset="d", train_test_split=1.5)
    sft = LLMEnvSpec.model_validate({"env_type": "sft", "name": "my/dataset"})
    assert sft.dataset == "my/dataset" and sft.response_column == "response"
    again = LLMEnvSpec.model_validate(sft.model_dump(mode="json"))
    assert again == sft


def test_multiturn_env_rules() -> None:
    with pytest.raises(ValidationError, match="Exactly one of env_name or entrypoint"):
        LLMEnvSpec(env_type="multiturn")
    with pytest.raises(ValidationError, match="Exactly one of env_name or entrypoint"):
        LLMEnvSpec(env_type="multiturn", env_name="game:X", entrypoint="m:f")
    with pytest.raises(ValidationError, match="env_config is only used with entrypoint"):
        LLMEnvSpec(env_type="multiturn", env_name="game:X", env_config={"a": 1})
    gem = LLMEnvSpec(env_type="multiturn", env_name="game:X")
    custom = LLMEnvSpec(env_type="multiturn", entrypoint="m:f", env_config={"a": 1})
    assert (gem.name, custom.name, gem.max_turns) == ("game:X", "m:f", None)
    with pytest.raises(TypeError, match="make_multiturn_env_factory"):
        gem.make_env()


def test_bandit_source_rules() -> None:
    with pytest.raises(ValidationError, match="requires either"):
        BanditEnvSpec()
    with pytest.raises(ValidationError, match="not both"):
        BanditEnvSpec(features="f.csv", targets="t.csv", entrypoint="m:f")
    with pytest.raises(ValidationError, match="together"):
        BanditEnvSpec(features="f.csv")
    with pytest.raises(ValidationError, match=r"Unsupported file type '\.xlsx' for 'f\.xlsx'"):
        BanditEnvSpec(features="f.xlsx", targets="t.csv")
    with pytest.raises(ValidationError, match="Unsupported file type 'targets' for 'targets'"):
        BanditEnvSpec(features="f.CSV", targets="targets")
    spec = BanditEnvSpec(features="f.csv", targets="t.csv")
    assert spec.name == "BanditEnv"
    assert BanditEnvSpec.model_validate(spec.model_dump(mode="json")) == spec
    BanditEnvSpec(entrypoint="m:f", path="/tmp", config={"arms": 3})


def test_offline_source_rules() -> None:
    with pytest.raises(ValidationError, match="requires either"):
        OfflineEnvSpec(name="CartPole-v1")
    OfflineEnvSpec(name="CartPole-v1", dataset_path="d.h5")
    OfflineEnvSpec(name="CartPole-v1", minari_dataset_id="cartpole/random-v0", remote=True)
    spec = OfflineEnvSpec(name="CartPole-v1", dataset_path="d.h5", num_envs=4, sync=True)
    assert (spec.num_envs, spec.sync) == (4, True)
    assert isinstance(spec, GymEnvSpec)


def test_resolution_by_agent_type() -> None:
    assert type(resolve_env_spec(ALGO_REGISTRY["DQN"], {"name": "CartPole-v1"})) is GymEnvSpec
    assert type(resolve_env_spec(ALGO_REGISTRY["MADDPG"], "mpe2.simple_spread_v3")) is PzEnvSpec
    assert type(resolve_env_spec(ALGO_REGISTRY["PPO"], "CartPole-v1")) is GymEnvSpec
    for name in ("CQN", "NeuralUCB", "GRPO"):
        with pytest.raises(ValueError, match="Only Gym and PettingZoo"):
            resolve_env_spec(ALGO_REGISTRY[name], "CartPole-v1")
    grpo = resolve_env_spec(ALGO_REGISTRY["GRPO"], {"dataset": "d", "reward_file_path": "r.py",
                                                    "reward_fn_name": "f",
                                                    "prompt_template": {"user_0": "{question}"}})
    assert grpo.env_type == "reasoning"
    # null values mean "use the default"
    gym = resolve_env_spec(ALGO_REGISTRY["DQN"], {"name": "CartPole-v1", "num_envs": None})
    assert gym.num_envs == 16
    with pytest.raises(TypeError, match="Expected a dict or environment spec"):
        resolve_env_spec(ALGO_REGISTRY["DQN"], 42)


def test_make_env_delegates_to_agilerl_envs(monkeypatch: pytest.MonkeyPatch) -> None:
    import agilerl.envs as envs

    calls = []
    monkeypatch.setattr(envs, "make_vector_env", lambda spec, extra_wrappers=None: calls.append(
        ("vector", spec, extra_wrappers)) or "vec")
    monkeypatch.setattr(envs, "make_single_env", lambda spec, extra_wrappers=None: calls.append(
        ("single", spec, extra_wrappers)) or "one")
    monkeypatch.setattr(envs, "make_pz_vector_env", lambda spec, extra_wrappers=None: calls.append(
        ("pz", spec, extra_wrappers)) or "pzvec")
    gym = GymEnvSpec(name="CartPole-v1", num_envs=2)
    marker = object()
    assert gym.make_env(extra_wrappers=[marker]) == "vec"
    assert gym.make_single_env() == "one"
    pz = PzEnvSpec(name="mpe2.simple_spread_v3")
    assert pz.make_env(extra_wrappers=[marker]) == "pzvec"
    assert calls == [("vector", gym, [marker]), ("single", gym, None), ("pz", pz, [marker])]


def test_env_spec_classes_are_exported() -> None:
    from agilerl.models.env import EnvSpec, LLMEnvType

    assert issubclass(models.GymEnvSpec, EnvSpec) and LLMEnvType.MULTITURN.value == "multiturn"


def test_files_resolve_relative_to_a_base_dir(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f.csv").write_text("a\n1\n")
    (tmp_path / "data" / "t.csv").write_text("t\n0\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = resolve_env_spec(ALGO_REGISTRY["NeuralUCB"],
                            {"features": "data/f.csv", "targets": "data/t.csv"}, base_dir=tmp_path)
    assert Path(spec.features) == tmp_path / "data" / "f.csv"
