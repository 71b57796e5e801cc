"""DPO and SFT through LocalTrainer: a population trains, checkpoints resume exactly, and the
saved elite adapter loads onto the base model and generates."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agilerl.llm.tiny import write_preference_set, write_sft_set  # noqa: E402
from agilerl.training.trainer import LocalTrainer  # noqa: E402

LORA = {"lora_r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0, "task_type": "CAUSAL_LM"}


def _manifest(name: str, model: Path, dataset: Path, **algorithm) -> dict:
    hp = {"lr": {"min": 1e-4, "max": 1e-2}}
    if name == "DPO":
        hp["beta"] = {"min": 0.01, "max": 0.5}
    return {
        "algorithm": {"name": name, "batch_size": 4, "lr": 5e-3, "max_grad_norm": 1.0,
                      "gradient_checkpointing": False, **algorithm},
        "environment": {"dataset": str(dataset), "train_test_split": 0.75},
        "training": {"max_steps": 4, "evo_steps": 2, "pop_size": 2, "evaluation_interval": 1},
        "mutation": {"probabilities": {"no_mut": 0.5, "rl_hp_mut": 0.5},
                     "rl_hp_selection": hp, "mutation_sd": 0.1, "rand_seed": 1},
        "selection_strategy": {"tournament_size": 2, "elitism": True},
        "network": {"pretrained_model_name_or_path": str(model), "max_context_length": 64,
                    "lora_config": LORA},
    }


def _adapters(population) -> list[dict]:
    return [agent.base.adapter_state(agent.adapter) for agent in population]


def _assert_same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for sa, sb in zip(a, b, strict=True):
        assert sa.keys() == sb.keys()
        for key in sa:
            assert torch.equal(sa[key], sb[key]), key


def test_dpo_population_trains_and_the_elite_adapter_loads_and_generates(
        tiny_model: Path, tmp_path: Path) -> None:
    from peft import PeftModel

    from agilerl.llm.model import load_causal_lm, load_tokenizer

    manifest = _manifest("DPO", tiny_model, write_preference_set(tmp_path / "data", rows=24),
                         beta=0.1, use_separate_reference_adapter=True)
    trainer = LocalTrainer.from_manifest(manifest, seed=3)
    population, fitness = trainer.train(verbose=False, save_elite=True, run_dir=tmp_path / "run")
    assert len(population) == 2 and all(a.steps[-1] >= 4 for a in population)
    # held-out preference accuracy is 0 before the first update (policy == reference)
    assert max(fitness) >= 0.75 and all(0.0 <= f <= 1.0 for f in fitness)
    elite = max(population, key=lambda a: a.fitness[-1])
    folder = tmp_path / "run" / "elite_adapter"
    assert (folder / "adapter_config.json").is_file()
    tokenizer = load_tokenizer(str(tiny_model))
    model = PeftModel.from_pretrained(load_causal_lm(str(tiny_model)), str(folder))
    ids = torch.tensor([tokenizer("Q12?")["input_ids"]])
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=3,
                         do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert out.shape[1] > ids.shape[1]
    with elite.evaluating() as member:
        expected = member(input_ids=ids).logits
    assert torch.allclose(model(input_ids=ids).logits, expected, atol=1e-5)


def test_sft_population_lowers_held_out_loss_through_local_trainer(tiny_model: Path,
                                                                   tmp_path: Path) -> None:
    manifest = _manifest("SFT", tiny_model, write_sft_set(tmp_path / "data", rows=32))
    manifest["algorithm"]["lr"] = 2e-2
    manifest["training"].update(max_steps=12, evo_steps=4)
    trainer = LocalTrainer.from_manifest(manifest, seed=2)
    start = [agent.held_out_loss(trainer.env) for agent in trainer.population]
    population, fitness = trainer.train(verbose=False)
    end = [agent.held_out_loss(trainer.env) for agent in population]
    assert min(end) < min(start) - 0.1, (start, end)  # ln(vocab) 4.58 at the start
    assert max(fitness) == pytest.approx(-min(end), rel=1e-5)


@pytest.mark.parametrize("algorithm", ["SFT", "DPO"])
def test_resume_from_checkpoint_is_exact(tiny_model: Path, tmp_path: Path,
                                         algorithm: str) -> None:
    if algorithm == "SFT":
        manifest = _manifest("SFT", tiny_model, write_sft_set(tmp_path / "data", rows=24))
    else:  # a reference adapter synced every pass (3 batches here), and LoRA dropout
        manifest = _manifest("DPO", tiny_model,
                             write_preference_set(tmp_path / "data", rows=16),
                             use_separate_reference_adapter=True)
        manifest["network"]["lora_config"] = {**LORA, "lora_dropout": 0.1}
    full = LocalTrainer.from_manifest(copy.deepcopy(manifest), seed=5)
    full_pop, full_fit = full.train(verbose=False, checkpoint_steps=2,
                                    checkpoint_path=tmp_path / "ck")
    full_adapters, full_steps = _adapters(full_pop), [a.steps[-1] for a in full_pop]
    first = sorted((tmp_path / "ck").iterdir())[0]
    resumed = LocalTrainer.from_manifest(copy.deepcopy(manifest), seed=5,
                                         resume_from_checkpoint=first)
    res_pop, res_fit = resumed.train(verbose=False)
    assert res_fit == full_fit
    assert [a.steps[-1] for a in res_pop] == full_steps
    assert [a.lr for a in res_pop] == [a.lr for a in full_pop]
    _assert_same(_adapters(res_pop), full_adapters)
    if algorithm == "DPO":
        _assert_same([a.base.adapter_state(a.reference_adapter) for a in res_pop],
                     [a.base.adapter_state(a.reference_adapter) for a in full_pop])
        assert [a.reference_epoch for a in res_pop] == [a.reference_epoch for a in full_pop] \
            == [1, 1]  # the second pass started after the checkpoint


def test_a_multiturn_environment_is_refused_for_dpo(tiny_model: Path, tmp_path: Path) -> None:
    from agilerl.core.errors import UnsupportedAlgorithmError

    manifest = _manifest("DPO", tiny_model, tmp_path / "unused.parquet")
    manifest["environment"] = {"env_type": "multiturn", "env_name": "game:GuessTheNumber-v0"}
    with pytest.raises(UnsupportedAlgorithmError, match="DPO does not support multi-turn"):
        LocalTrainer.from_manifest(manifest, seed=0)


def test_dpo_and_sft_modules_import_without_the_llm_extra() -> None:
    import subprocess
    import sys

    code = ("import sys\n"
            "for name in ('transformers', 'peft', 'datasets', 'accelerate'):\n"
            "    sys.modules[name] = None  # import fails as if not installed\n"
            "import agilerl, agilerl.algorithms.dpo, agilerl.algorithms.sft\n"
            "import agilerl.llm.datasets, agilerl.llm.dataset_envs, agilerl.training.llm_dataset\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_without_the_llm_extra_training_names_the_install(
        tiny_model: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    import importlib.util

    import yaml

    from agilerl.cli.main import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "peft" else real(name, *a))
    manifest = tmp_path / "sft.yaml"
    manifest.write_text(yaml.safe_dump(_manifest("SFT", tiny_model,
                                                 write_sft_set(tmp_path, rows=8))))
    assert main(["train", str(manifest), "--no-verbose"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'agilerl[llm]'" in err and "Traceback" not in err
