"""The reasoning environment (prompt templates, the user's reward function, batches) and the
multi-turn environment (a custom entrypoint game; GEM names)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from llm_helpers import reasoning_manifest

from agilerl.llm.errors import RewardFunctionError
from agilerl.llm.reasoning import template_messages
from agilerl.llm.reward import load_reward_function, reward_caller
from agilerl.training.trainer import LocalTrainer

GAME = '''
import time


class SayGame:
    """Say the digit; two tries. Reward 1 when the reply contains it, else -0.1. Each turn
    takes ``pause`` seconds (a slow game)."""

    def __init__(self, digit="7", tries=2, pause=0.0):
        self.digit, self.tries, self.pause = digit, tries, pause

    def reset(self, seed=None):
        self.turn = 0
        return f"Say {self.digit}", {}

    def step(self, text):
        time.sleep(self.pause)
        self.turn += 1
        won = self.digit in text
        return "Again", (1.0 if won else -0.1), won, self.turn >= self.tries, {}


def make(**kwargs):
    return SayGame(**kwargs)
'''


def test_prompt_template_orders_roles_and_substitutes_only_question_and_answer() -> None:
    messages = template_messages({"user_1": "{question} = {answer} {other}",
                                  "system_0": "Be {brief}"},
                                 {"question": [1, 2], "answer": 3})
    assert messages == [{"role": "system", "content": "Be {brief}"},
                        {"role": "user", "content": "[1, 2] = 3 {other}"}]
    with pytest.raises(ValueError, match="prompt_template: key 'user'"):
        template_messages({"user": "x"}, {})


def test_reward_function_errors_name_the_fields(tmp_path: Path) -> None:
    with pytest.raises(RewardFunctionError, match="reward_file_path: file"):
        load_reward_function(tmp_path / "missing.py", "f")
    file = tmp_path / "reward.py"
    file.write_text("def score(completion, answer):\n    return 1\n")
    with pytest.raises(RewardFunctionError, match="reward_fn_name: .* no function 'f'.*score"):
        load_reward_function(file, "f")
    file.write_text("def bad(completion, answer):\n    return 'high'\n")
    with pytest.raises(RewardFunctionError, match="returned 'high'"):
        reward_caller(load_reward_function(file, "bad"))("x", "y", "z")


def test_reward_arguments_are_matched_by_name_or_position() -> None:
    def named(prompt, completion, solution):  # the reference Countdown order differs
        return float(completion == "c" and solution == "a" and prompt == "q")

    def positional(x, y, z):
        return float((x, y, z) == ("c", "a", "q"))

    assert reward_caller(named)("c", "a", "q") == 1.0
    assert reward_caller(positional)("c", "a", "q") == 1.0


def test_reasoning_batches_follow_the_step_and_cover_an_epoch(tiny_model: Path,
                                                              token_task: Path) -> None:
    trainer = LocalTrainer.from_manifest(
        reasoning_manifest(tiny_model, token_task, reward="emit_token"), seed=0)
    env = trainer.env
    assert len(env.train_rows) == 24 and len(env.test_rows) == 8
    epoch = [tuple(map(str, b.rows)) for b in (env.train_batch(s, 4) for s in range(6))]
    rows = {row for batch in epoch for row in batch}
    assert len(rows) == 24  # one epoch visits every training row once
    assert env.train_batch(3, 4).rows == env.train_batch(3, 4).rows
    assert env.train_batch(6, 4).rows != env.train_batch(0, 4).rows  # next epoch reshuffled
    assert env.rewards(["7777xxxx", "abc"], [{"answer": "7"}] * 2).tolist() == [0.5, 0.0]
    assert env.accuracy(np.array([1.0, 0.5])) == 0.5


def test_num_epochs_sets_the_budget(tiny_model: Path, token_task: Path) -> None:
    manifest = reasoning_manifest(tiny_model, token_task, training={"num_epochs": 2})
    trainer = LocalTrainer.from_manifest(manifest, seed=0)
    assert trainer.training_spec.max_steps == 2 * 12  # 24 rows, 2 prompts per step


def test_a_too_long_prompt_is_refused_naming_max_context_length(tiny_model: Path,
                                                                 token_task: Path) -> None:
    from agilerl.core.errors import EnvironmentSetupError

    manifest = reasoning_manifest(tiny_model, token_task)
    manifest["network"]["max_context_length"] = 8  # type: ignore[index]
    with pytest.raises(EnvironmentSetupError, match="max_context_length"):
        LocalTrainer.from_manifest(manifest, seed=0)


def _multiturn_manifest(model: Path, game: Path, name: str = "GRPO") -> dict[str, object]:
    manifest = reasoning_manifest(model, game, name)
    manifest["environment"] = {"env_type": "multiturn", "entrypoint": f"{game}:make",
                               "env_config": {"digit": "7", "tries": 2}, "max_reward": 1.0,
                               "max_turns": 3}
    return manifest


@pytest.mark.parametrize("name", ["GRPO", "LLMREINFORCE"])
def test_a_custom_multiturn_game_trains(name: str, tiny_model: Path, tmp_path: Path) -> None:
    game = tmp_path / "say_game.py"
    game.write_text(GAME)
    trainer = LocalTrainer.from_manifest(_multiturn_manifest(tiny_model, game, name), seed=0)
    assert trainer.env.max_turns == 3
    population, fitnesses = trainer.train(verbose=False)
    assert [a.steps[-1] for a in population] == [2, 2]
    assert all(-0.3 <= f <= 1.0 for f in fitnesses)
    for agent in population:
        assert agent.optimizer.state_dict()["state"]


def test_max_wall_seconds_stops_a_multiturn_run_between_steps_and_it_continues(
        tiny_model: Path, tmp_path: Path) -> None:
    import time
    import warnings

    game = tmp_path / "say_game.py"
    game.write_text(GAME)
    manifest = _multiturn_manifest(tiny_model, game)
    manifest["environment"]["env_config"]["pause"] = 0.1  # type: ignore[index]
    manifest["training"].update(max_steps=3, evo_steps=3,  # type: ignore[attr-defined]
                                max_wall_seconds=0.3)
    trainer = LocalTrainer.from_manifest(manifest, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.monotonic()
        population, _ = trainer.train(verbose=False, checkpoint_steps=100,
                                      checkpoint_path=tmp_path / "checkpoints")
    assert not [w for w in caught if "max_wall_seconds" in str(w.message)]
    # Member 0 spent the budget in its first step (4 games x 0.1 s a turn); member 1 never
    # started; the generation was evaluated and a checkpoint written.
    assert [a.steps[-1] for a in population] == [1, 0]
    assert time.monotonic() - started < 30
    assert trainer.last_checkpoint is not None and "max_wall_seconds" in str(
        (trainer.last_checkpoint / "index.json").read_text())
    trainer.training_spec.max_wall_seconds = None  # the run continues to max_steps
    population, _ = trainer.train(verbose=False)
    assert [a.steps[-1] for a in population] == [3, 3]


def test_multiturn_turns_are_credited_with_their_return_to_go(tiny_model: Path,
                                                               tmp_path: Path) -> None:
    from agilerl.llm.multiturn import Episode
    from agilerl.training.llm_multiturn import MultiTurnMemberTrainer

    game = tmp_path / "say_game.py"
    game.write_text(GAME)
    trainer = LocalTrainer.from_manifest(_multiturn_manifest(tiny_model, game), seed=0)
    member = MultiTurnMemberTrainer(trainer.env)
    episode = Episode(group=0, prompts=[[5], [5, 6]], completions=[[7], [8]],
                      rewards=[-0.1, 1.0])
    agent = trainer.population[0]
    experience = member.experience(agent, [episode])
    assert experience.rewards.tolist() == pytest.approx([0.9, 1.0])
    assert experience.episode_start.tolist() == [True, False]
    agent.spec = agent.spec.model_copy(update={"advantage_granularity": "trajectory"})
    assert member.experience(agent, [episode]).rewards.tolist() == pytest.approx([0.9, 0.9])


def test_a_gem_name_without_gem_says_how_to_install(monkeypatch) -> None:
    import sys

    from agilerl.core.errors import MissingExtraError
    from agilerl.llm.multiturn import make_multiturn_env_factory

    monkeypatch.setitem(sys.modules, "gem", None)
    spec = SimpleNamespace(entrypoint=None, env_name="game:GuessTheNumber-v0-easy")
    with pytest.raises(MissingExtraError, match="gem-llm"):
        make_multiturn_env_factory(spec)


def test_gem_games_play_offline() -> None:
    pytest.importorskip("gem")
    from agilerl.llm.multiturn import make_multiturn_env_factory

    factory = make_multiturn_env_factory(
        SimpleNamespace(entrypoint=None, env_name="game:GuessTheNumber-v0-easy"))
    observation, _ = factory().reset(seed=0)
    assert "Guess The Number" in observation
    with pytest.raises(ValueError, match="env_name = 'game:NoSuchGame-v0'"):
        make_multiturn_env_factory(SimpleNamespace(entrypoint=None,
                                                   env_name="game:NoSuchGame-v0"))


def test_evaluation_interval_spaces_the_evaluations(tiny_model: Path, token_task: Path,
                                                    monkeypatch) -> None:
    from agilerl.llm.reasoning import ReasoningEnv

    calls: list[int] = []
    original = ReasoningEnv.evaluate

    def counted(self, agent, loop=1):  # type: ignore[no-untyped-def]
        calls.append(agent.steps[-1])
        return original(self, agent, loop)

    monkeypatch.setattr(ReasoningEnv, "evaluate", counted)
    manifest = reasoning_manifest(tiny_model, token_task, pop_size=1, evolve=False,
                                  training={"max_steps": 4, "evaluation_interval": 2})
    population, _ = LocalTrainer.from_manifest(manifest, seed=0).train(verbose=False)
    assert calls == [1, 2, 4]  # the first generation, then every 2 steps
    assert len(population[0].fitness) == 4 and population[0].fitness[2] == \
        population[0].fitness[1]
