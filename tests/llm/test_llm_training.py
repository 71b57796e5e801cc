"""LLM RL algorithms train through LocalTrainer and ``agilerl train`` on the tiny local model:
a generation each, the same seed gives the same run, resume is exact, the elite adapter loads
onto the base model and generates, and GRPO learns the token task (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from llm_helpers import RL_ALGOS, reasoning_manifest

from agilerl.training.trainer import LocalTrainer

REPO = Path(__file__).resolve().parents[2]


def _adapters(population: list) -> list[dict[str, torch.Tensor]]:
    return [agent.base.adapter_state(agent.adapter) for agent in population]


def _same(a: list[dict[str, torch.Tensor]], b: list[dict[str, torch.Tensor]]) -> bool:
    return all(x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
               for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", RL_ALGOS)
def test_each_algorithm_trains_a_generation(name: str, tiny_model: Path,
                                            token_task: Path) -> None:
    trainer = LocalTrainer.from_manifest(reasoning_manifest(tiny_model, token_task, name),
                                         seed=0)
    before = _adapters(trainer.population)
    population, fitnesses = trainer.train(verbose=False)
    assert [agent.steps[-1] for agent in population] == [2, 2]
    assert all(0.0 <= f <= 1.0 for f in fitnesses)
    for agent in population:  # one optimizer step per training step
        state = agent.optimizer.state_dict()["state"]
        assert state and all(int(s["step"]) == 2 for s in state.values())
    assert not _same(before, _adapters(population))  # the adapters learned
    assert population[0].base is population[1].base


def test_metrics_name_reward_accuracy_kl_loss_and_tokens_per_second(
        tiny_model: Path, token_task: Path, tmp_path: Path) -> None:
    trainer = LocalTrainer.from_manifest(reasoning_manifest(tiny_model, token_task), seed=0)
    trainer.train(verbose=False, run_dir=tmp_path)
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    for metric in ("reward", "accuracy", "kl", "loss", "tokens_per_second"):
        assert f"train/mean_{metric}" in header


def test_the_same_seed_gives_the_same_run(tiny_model: Path, token_task: Path) -> None:
    runs = []
    for _ in range(2):
        trainer = LocalTrainer.from_manifest(reasoning_manifest(tiny_model, token_task),
                                             seed=5)
        population, fitnesses = trainer.train(verbose=False)
        runs.append((fitnesses, _adapters(population),
                     [a.hyperparameters for a in population]))
    assert runs[0][0] == runs[1][0] and runs[0][2] == runs[1][2]
    assert _same(runs[0][1], runs[1][1])


def test_resume_from_a_checkpoint_is_exact(tiny_model: Path, token_task: Path,
                                           tmp_path: Path) -> None:
    manifest = reasoning_manifest(tiny_model, token_task, training={"max_steps": 4})
    full = LocalTrainer.from_manifest(manifest, seed=2)
    population, fitnesses = full.train(verbose=False, checkpoint_steps=2,
                                       checkpoint_path=tmp_path / "ckpt")
    expected = (fitnesses, _adapters(population), [a.hyperparameters for a in population])
    first = sorted((tmp_path / "ckpt").iterdir())[0]
    assert first.name.startswith("gen00002-step0000000004")
    # No seed given: the run seed comes from the checkpoint.
    resumed = LocalTrainer.from_manifest(manifest, resume_from_checkpoint=first)
    population, fitnesses = resumed.train(verbose=False)
    assert fitnesses == expected[0]
    assert [a.hyperparameters for a in population] == expected[2]
    assert _same(_adapters(population), expected[1])
    optimizer = population[0].optimizer.state_dict()["state"]
    assert optimizer, "the optimizer state was restored and used"


def test_the_elite_adapter_loads_onto_the_base_model_and_generates(
        tiny_model: Path, token_task: Path, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trainer = LocalTrainer.from_manifest(reasoning_manifest(tiny_model, token_task), seed=0)
    trainer.train(verbose=False, save_elite=True, elite_path=tmp_path / "elite.pt")
    folder = tmp_path / "elite_adapter"
    assert (folder / "adapter_config.json").is_file()
    from agilerl.algorithms import algorithm_class

    elite = algorithm_class("GRPO").load(tmp_path / "elite.pt")
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    model = PeftModel.from_pretrained(base, folder)
    loaded = dict(model.named_parameters())
    for key, value in elite.base.adapter_state(elite.adapter).items():
        assert torch.equal(loaded[key.replace(".weight", ".default.weight")].detach(), value)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    ids = tokenizer("Say 7", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=3, do_sample=False,
                         pad_token_id=tokenizer.pad_token_id)
    assert out.shape[1] > ids["input_ids"].shape[1]
    assert elite.generate([ids["input_ids"][0].tolist()], greedy=True).texts


def test_agilerl_train_cli_runs_an_llm_manifest(tiny_model: Path, token_task: Path,
                                                tmp_path: Path) -> None:
    manifest = tmp_path / "grpo.yaml"
    manifest.write_text(yaml.safe_dump(reasoning_manifest(tiny_model, token_task, "CISPO")))
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.cli", "train", str(manifest), "--no-verbose",
         "--seed", "1", "--run-dir", str(tmp_path / "run"), "--save-elite",
         "--checkpoint-steps", "2"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert list((tmp_path / "run" / "checkpoints").iterdir())
    assert (tmp_path / "run" / "elite_adapter" / "adapter_model.safetensors").is_file()


def test_a_missing_model_folder_exits_2_naming_the_field(token_task: Path,
                                                         tmp_path: Path) -> None:
    manifest = tmp_path / "grpo.yaml"
    manifest.write_text(yaml.safe_dump(
        reasoning_manifest(tmp_path / "no-model", token_task)))
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.cli", "train", str(manifest), "--no-verbose"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "pretrained_model_name_or_path" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_grpo_raises_the_mean_reward_of_the_token_task(tiny_model: Path,
                                                       token_task: Path) -> None:
    manifest = reasoning_manifest(
        tiny_model, token_task, algorithm={"batch_size": 4, "group_size": 8, "beta": 0.0,
                                           "lr": 0.03, "max_output_tokens": 8},
        training={"max_steps": 30, "evo_steps": 5}, pop_size=1, evolve=False,
        reward="emit_token")
    trainer = LocalTrainer.from_manifest(manifest, seed=1)
    population, _ = trainer.train(verbose=False)
    scores = population[0].scores
    start, end = sum(scores[:5]) / 5, sum(scores[-5:]) / 5
    assert start < 0.05
    assert end > 0.3 and end > 10 * start
