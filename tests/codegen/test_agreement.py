"""jsonschema (bundle) and the generated Pydantic models agree on valid and invalid input."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from schema_agreement import pydantic_valid

DQN: dict[str, Any] = {
    "algorithm": {"name": "DQN", "lr": 0.0001, "batch_size": 64},
    "environment": {"name": "CartPole-v1", "num_envs": 4},
    "training": {"max_steps": 10000, "pop_size": 2, "evo_steps": 1000},
    "network": {"latent_dim": 64, "arch": "mlp", "encoder_config": {"hidden_size": [64]},
                "head_config": {"hidden_size": [64]}},
    "mutation": {"probabilities": {"no_mut": 0.5}, "rl_hp_selection": {"lr": {"min": 0.0001, "max": 0.01}}},
    "replay_buffer": {"max_size": 10000},
    "selection_strategy": {"tournament_size": 2, "elitism": True},
}
GRPO: dict[str, Any] = {
    "algorithm": {"name": "GRPO", "group_size": 4},
    "environment": {"env_type": "reasoning", "dataset": "d.parquet", "reward_file_path": "r.py",
                    "reward_fn_name": "f", "prompt_template": {"user_1": "{question}"}},
    "network": {"pretrained_model_name_or_path": "m", "max_context_length": 512,
                "lora_config": {"lora_r": 8}},
}
MADDPG: dict[str, Any] = {
    "algorithm": {"name": "MADDPG"},
    "environment": {"name": "mpe2.simple_speaker_listener_v4", "num_envs": 2},
}


def setter(path: str, value: Any, base: dict[str, Any] = DQN) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        doc = copy.deepcopy(base)
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
        return doc
    return make


def renamed(path: str, spelling: str, base: dict[str, Any] = DQN
            ) -> Callable[[], dict[str, Any]]:
    """``base`` with the key at ``path`` written under another spelling."""
    def make() -> dict[str, Any]:
        doc = copy.deepcopy(base)
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[key]
        node[spelling] = node.pop(last)
        return doc
    return make


def deleter(path: str, base: dict[str, Any] = DQN) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        doc = copy.deepcopy(base)
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[key]
        del node[last]
        return doc
    return make


VALID = {
    "dqn": lambda: copy.deepcopy(DQN),
    "grpo": lambda: copy.deepcopy(GRPO),
    "maddpg minimal": lambda: copy.deepcopy(MADDPG),
    # an extension: the reference always steps PettingZoo envs in subprocesses
    "pettingzoo sync": setter("environment.sync", False, MADDPG),
    "alias population_size": renamed("training.pop_size", "population_size"),
    "alias metrics_interval": renamed("training.evo_steps", "metrics_interval"),
    "memory_size alias": renamed("replay_buffer.max_size", "memory_size"),
    "legacy tournament_selection": lambda: {**deleter("selection_strategy")(),
                                           "tournament_selection": {"tournament_size": 3}},
    "multi_frequency block": setter("selection_strategy", {"strategy": "multi_frequency",
                                                           "n_subpopulations": 2}),
    "integral float for int": setter("training.pop_size", 4.0),
    "int for float": setter("algorithm.lr", 1),
    "runtime-only null": setter("algorithm.actor_network", None),
    "net_config mapping": setter("algorithm.net_config", {"latent_dim": 32}),
    "hp_config mapping": setter("algorithm.hp_config", {"lr": {"min": 0.1, "max": 0.2}}),
    "cudagraphs on DQN": setter("algorithm.cudagraphs", True),
    "deferred network": setter("network", {"encoder_config": {"hidden_size": [32]},
                                           "head_config": {"hidden_size": [32]}}),
    "deferred simba": setter("network", {"simba": True, "encoder_config": {"hidden_size": 128, "num_blocks": 2},
                                         "head_config": {"hidden_size": [32]}}),
    "encoder arch key": setter("network", {"encoder_config": {"arch": "lstm", "hidden_state_size": 8},
                                           "head_config": {"hidden_size": [32]}}),
    "network null": setter("network", None),
    "network empty (Arena's unset)": setter("network", {}),
    "network empty on GRPO": setter("network", {}, GRPO),
    "squash_output on PPO": lambda: {**setter("network.squash_output", True)(),
                                     "algorithm": {"name": "PPO"}},
    "encoder arch wins over top arch": setter("network.encoder_config.arch", "mlp",
                                              setter("network.arch", "cnn")()),
    "wrapper pair": setter("environment.wrappers", ["a:B", ["c:D", {"k": 1}]]),
    "bandit gamma above 1": lambda: {"algorithm": {"name": "NeuralTS", "gamma": 3},
                                     "environment": {"name": "IRIS"}},
    "cispo asymmetric clip": lambda: {**copy.deepcopy(GRPO), "algorithm": {
        "name": "CISPO", "group_size": 2, "clip_coef": [0.8, 2.0]}},
    "llm dataset alias name": renamed("environment.dataset", "name", GRPO),
    "custom env config": setter("environment.config", {"anything": [1, {"x": None}]}),
}

INVALID = {
    "both pop_size spellings": setter("training.population_size", 4),
    "both evo_steps spellings": setter("training.metrics_interval", 500),
    "both max_size spellings": setter("replay_buffer.memory_size", 500),
    "both llm dataset spellings": setter("environment.name", "d2", GRPO),
    "unknown top-level key": setter("logging", {}),
    "missing environment": deleter("environment"),
    "missing algorithm name": deleter("algorithm.name"),
    "lowercase algorithm name": setter("algorithm.name", "dqn"),
    "unknown algorithm key": setter("algorithm.learning_rate", 0.1),
    "negative lr": setter("algorithm.lr", -0.1),
    "numeric string lr": setter("algorithm.lr", "1e-6"),
    "boolean pop_size": setter("training.pop_size", True),
    "fractional pop_size": setter("training.pop_size", 2.5),
    "pop_size zero": setter("training.pop_size", 0),
    "training null": setter("training", None),
    "unknown training key": setter("training.max_step", 10),
    "gamma above 1": setter("algorithm.gamma", 1.5),
    "runtime-only value": setter("algorithm.actor_network", "my_net"),
    "net_config scalar": setter("algorithm.net_config", 3),
    "cudagraphs on PPO": lambda: {**copy.deepcopy(DQN), "algorithm": {"name": "PPO", "cudagraphs": True}},
    "unknown env key": setter("environment.render_mode", "human"),
    "num_envs zero": setter("environment.num_envs", 0),
    "env name null": setter("environment.name", None),
    "unknown network key": setter("network.dropout", 0.1),
    "unknown encoder key": setter("network.encoder_config.hidden_sizes", [3]),
    "arch with wrong encoder": setter("network.arch", "cnn"),
    "squash_output on DQN": setter("network.squash_output", True),
    "encoder arch with wrong keys": setter("network.encoder_config.arch", "lstm"),
    "arch not a known kind": setter("network.arch", "transformer"),
    "activation case": setter("network.head_config.activation", "relu"),
    "head hidden_size empty": setter("network.head_config.hidden_size", []),
    "finetuning net on DQN": setter("network", GRPO["network"]),
    "rl net on GRPO": setter("network", DQN["network"], GRPO),
    "unknown probability": setter("mutation.probabilities.nomut", 0.1),
    "probability above 1": setter("mutation.probabilities.no_mut", 1.5),
    "rl_hp entry missing max": setter("mutation.rl_hp_selection.lr", {"min": 0.1}),
    "rl_hp entry unknown key": setter("mutation.rl_hp_selection.lr", {"min": 0.1, "max": 1, "step": 2}),
    "unknown mutation key": setter("mutation.mutate_elite", True),
    "n_step zero": setter("replay_buffer.n_step_buffer_args.n_step", 0),
    "unknown per arg": setter("replay_buffer.per_buffer_args.beta", 0.4),
    "max_size zero": setter("replay_buffer.max_size", 0),
    "bogus strategy": setter("selection_strategy.strategy", "roulette"),
    "tournament keys under mf": setter("selection_strategy", {"strategy": "multi_frequency",
                                                              "tournament_size": 2}),
    "unknown selection key": setter("selection_strategy.size", 2),
    "mf ratio zero": setter("selection_strategy", {"strategy": "multi_frequency",
                                                   "evolution_frequency_ratios": [0, 5]}),
    "llm env_type null": setter("environment.env_type", None, GRPO),
    "llm env unknown key": setter("environment.split", 0.5, GRPO),
    "llm train_test_split above 1": setter("environment.train_test_split", 1.5, GRPO),
    "grpo missing group_size": deleter("algorithm.group_size", GRPO),
    "lora unknown key": setter("network.lora_config.rank", 4, GRPO),
    "lora_r zero": setter("network.lora_config.lora_r", 0, GRPO),
    "wrapper triple": setter("environment.wrappers", [["a:B", {}, {}]]),
    "cispo clip string": lambda: {**copy.deepcopy(GRPO), "algorithm": {
        "name": "CISPO", "group_size": 2, "clip_coef": "0.2"}},
}


@pytest.mark.parametrize("make", VALID.values(), ids=VALID.keys())
def test_valid_for_both(make: Callable[[], dict[str, Any]], validator: Any) -> None:
    doc = make()
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    assert errors == []
    assert pydantic_valid(doc)


@pytest.mark.parametrize("make", INVALID.values(), ids=INVALID.keys())
def test_invalid_for_both(make: Callable[[], dict[str, Any]], validator: Any) -> None:
    doc = make()
    assert not validator.is_valid(doc)
    assert not pydantic_valid(doc)
