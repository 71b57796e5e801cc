"""Preference and SFT dataset environments: columns, batches, seeded order, exact resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("datasets")
pytest.importorskip("transformers")

from agilerl.llm.dataset_envs import (  # noqa: E402
    PreferenceEnv,
    SFTEnv,
    make_dataset_env,
)
from agilerl.llm.datasets import DatasetSourceError  # noqa: E402
from agilerl.models import LLMEnvSpec  # noqa: E402
from tests.llm.pref_tokenizer import word_tokenizer  # noqa: E402


def _prefs(path: Path, rows: int = 10) -> Path:
    path.write_text("".join(json.dumps({"prompt": f"p{i}", "chosen": f"c{i}",
                                        "rejected": f"r{i}"}) + "\n" for i in range(rows)))
    return path


def _env(tmp_path: Path, env_type: str = "preference", **fields) -> object:
    spec = LLMEnvSpec(env_type=env_type, dataset=str(_prefs(tmp_path / "prefs.jsonl")),
                      train_test_split=0.8, **fields)
    return make_dataset_env(spec, word_tokenizer(), max_context_length=16, seed=7)


def test_preference_batches_hold_chosen_then_rejected_rows(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert isinstance(env, PreferenceEnv)
    batch = env.train_batch(0, 3)
    assert batch.pairs == 3 and len(batch.tokens) == 6
    tok = env.tokenizer
    for row in range(3):
        chosen = tok.decode(batch.chosen.input_ids[row][batch.chosen.response_mask[row]])
        rejected = tok.decode(batch.rejected.input_ids[row][batch.rejected.response_mask[row]])
        assert chosen.startswith("c") and rejected.startswith("r")
        assert chosen.split()[0][1:] == rejected.split()[0][1:]  # the same pair
    held_out = [b.pairs for b in env.eval_batches(3)]
    assert held_out == [2]


def test_sft_env_reads_the_response_column(tmp_path: Path) -> None:
    env = _env(tmp_path, env_type="sft", response_column="chosen")
    assert isinstance(env, SFTEnv)
    batch = env.train_batch(0, 3)
    text = env.tokenizer.decode(batch.input_ids[0][batch.response_mask[0]])
    assert text.startswith("c")


def test_sft_env_missing_response_column_names_it_and_the_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetSourceError, match=r"prefs\.jsonl' has no column 'response', "
                                                 r"which an SFT environment needs"):
        _env(tmp_path, env_type="sft")


def test_preference_env_missing_rejected_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "half.jsonl"
    path.write_text(json.dumps({"prompt": "p1", "chosen": "c1"}) + "\n" * 2)
    spec = LLMEnvSpec(env_type="preference", dataset=str(path))
    with pytest.raises(DatasetSourceError, match="no column 'rejected', which a preference"):
        make_dataset_env(spec, word_tokenizer(), max_context_length=8)


def _prompts(batch) -> list[int]:
    return batch.chosen.input_ids[:, 1].tolist()


def test_every_training_row_is_served_once_per_pass_and_passes_reshuffle(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert env.batches_per_epoch(3) == 3  # 8 training rows, batches of 3
    first = [p for i in range(3) for p in _prompts(env.train_batch(i, 3))]
    assert len(first) == 8 and len(set(first)) == 8 and env.epoch_of(2, 3) == 0
    second = [p for i in range(3, 6) for p in _prompts(env.train_batch(i, 3))]
    assert env.epoch_of(3, 3) == 1 and sorted(second) == sorted(first) and second != first


def test_batches_are_a_pure_function_of_their_index_and_seed(tmp_path: Path) -> None:
    env, twin = _env(tmp_path), _env(tmp_path)
    expected = [_prompts(env.train_batch(i, 3)) for i in range(7)]
    assert [_prompts(twin.train_batch(i, 3)) for i in (5, 6)] == expected[5:]  # resumed at batch 5
    assert [_prompts(twin.train_batch(i, 3)) for i in range(7)] == expected
    spec = LLMEnvSpec(env_type="preference", dataset=str(tmp_path / "prefs.jsonl"),
                      train_test_split=0.8)
    other = make_dataset_env(spec, word_tokenizer(), max_context_length=16, seed=8)
    assert [_prompts(other.train_batch(i, 3)) for i in range(7)] != expected


class _Member:
    """Counts how often the environment asks for a held-out evaluation."""

    def __init__(self) -> None:
        self.steps, self.fitness, self.calls = [0], [], 0

    def evaluate_dataset(self, env) -> float:
        self.calls += 1
        return float(self.steps[-1])


def test_evaluation_is_recomputed_once_per_evaluation_interval(tmp_path: Path) -> None:
    spec = LLMEnvSpec(env_type="preference", dataset=str(_prefs(tmp_path / "prefs.jsonl")))
    env = make_dataset_env(spec, word_tokenizer(), max_context_length=16, evaluation_interval=4)
    member = _Member()
    for step in range(9):
        member.steps[-1] = step
        member.fitness.append(env.evaluate(member))
    assert member.calls == 3  # steps 0, 4 and 8
    assert member.fitness == [0.0] * 4 + [4.0] * 4 + [8.0]


def test_eval_rows_are_capped_and_in_order(tmp_path: Path, monkeypatch) -> None:
    from agilerl.llm import dataset_envs

    monkeypatch.setattr(dataset_envs, "EVAL_ROWS", 3)
    spec = LLMEnvSpec(env_type="preference", dataset=str(_prefs(tmp_path / "p.jsonl", 20)),
                      train_test_split=0.5)
    env = make_dataset_env(spec, word_tokenizer(), max_context_length=16)
    batches = list(env.eval_batches(2))
    assert [b.pairs for b in batches] == [2, 1]
    assert [p for b in batches for p in _prompts(b)] == \
        [word_tokenizer().convert_tokens_to_ids(p) for p in list(env.test["prompt"])[:3]]


def test_the_env_spec_builds_its_environment_from_a_tokenizer(tmp_path: Path) -> None:
    spec = LLMEnvSpec(env_type="preference", dataset=str(_prefs(tmp_path / "prefs.jsonl")))
    assert isinstance(spec.make_env(tokenizer=word_tokenizer(), max_context_length=16),
                      PreferenceEnv)
    sft = LLMEnvSpec(env_type="sft", dataset=str(tmp_path / "prefs.jsonl"),
                     response_column="chosen")
    assert isinstance(sft.make_env(tokenizer=word_tokenizer(), max_context_length=16), SFTEnv)
    with pytest.raises(TypeError, match="tokenizer"):
        spec.make_env()
    with pytest.raises(TypeError, match="max_context_length"):
        spec.make_env(tokenizer=word_tokenizer())
    multiturn = LLMEnvSpec(env_type="multiturn", entrypoint="games:Guess")
    with pytest.raises(TypeError, match="make_multiturn_env_factory"):
        multiturn.make_env(tokenizer=word_tokenizer())
