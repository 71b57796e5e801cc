"""Odd documents never crash validation: each gives located errors (or validates)."""

from __future__ import annotations

import pytest

from agilerl.core.manifest_errors import ManifestError
from agilerl.models.loading import parse_text
from agilerl.models.validation import check_document

ODD = {
    "algorithm: DQN\nenvironment: CartPole-v1\n": {"algorithm"},
    "algorithm: {name: DQN}\nenvironment: [1]\ntraining: 5\nnetwork: mlp\n"
    "mutation: {rl_hp_selection: [1, 2]}\nselection_strategy: {strategy: 5}\n":
        {"environment", "training", "network", "mutation.rl_hp_selection",
         "selection_strategy.strategy"},
    "algorithm: {name: [DQN]}\nenvironment: {name: 5}\n": {"algorithm.name", "environment.name"},
    "algorithm: {name: DQN, lr: .nan}\nenvironment: {name: CartPole-v1}\n": {"algorithm.lr"},
    "algorithm: {<<: {name: DQN}, lr: 0.1}\nenvironment: {name: CartPole-v1}\n": set(),
    "algorithm: {name: DQN}\nenvironment: {name: CartPole-v1}\n"
    "network: {encoder_config: 5, head_config: []}\n": {"network.head_config",
                                                        "network.encoder_config"},
    "algorithm: {name: GRPO}\nenvironment: {}\nnetwork: {arch: mlp}\n":
        {"algorithm.group_size", "network.pretrained_model_name_or_path",
         "network.max_context_length", "network.arch", "environment.dataset",
         "environment.reward_file_path", "environment.reward_fn_name",
         "environment.prompt_template"},
    "algorithm: {name: IPPO}\nenvironment: {name: 'a..b'}\n": {"environment.name"},
    "algorithm: null\nenvironment: null\n": {"algorithm", "environment"},
    "algorithm: {name: DQN}\nenvironment: {name: CartPole-v1, wrappers: [[a, {}], 'x:y', [1, 2, 3]]}\n":
        {"environment.wrappers[2]"},
    "algorithm: {name: DQN}\nenvironment: {name: CartPole-v1}\ntournament_selection: {}\n"
    "selection_strategy: {}\n": {"tournament_selection"},
}


@pytest.mark.parametrize("text", list(ODD), ids=[f"odd{i}" for i in range(len(ODD))])
def test_odd_documents_give_located_errors(text: str) -> None:
    report, _ = check_document(parse_text(text, "odd.yaml"), check_environment=True)
    assert {issue.path for issue in report.errors} == ODD[text]
    assert all(issue.location is not None for issue in report.errors)


def test_unparseable_key_is_a_syntax_error() -> None:
    with pytest.raises(ManifestError, match="not valid YAML/JSON"):
        parse_text("? [a, b]\n: 1\nalgorithm: {name: DQN}\n", "odd.yaml")
