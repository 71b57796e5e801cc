"""The LLM seam: model loading without downloads, LoRA configs, and a population of
adapters over one shared base model (selection copies adapters, mutation changes
hyperparameters only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from agilerl.llm.errors import ModelUnavailableError
from agilerl.llm.model import load_causal_lm, load_tokenizer, lora_config

LORA = {"lora_r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0, "task_type": "CAUSAL_LM"}


def _grpo(tiny_model: Path, index: int = 0, **extra: Any) -> Any:
    from agilerl.algorithms import algorithm_class

    settings = {"group_size": 2, "batch_size": 2, "max_output_tokens": 4, "lr": 0.01,
                "pretrained_model_name_or_path": str(tiny_model), "max_model_len": 64,
                "lora_config": LORA, **extra}
    return algorithm_class("GRPO")(index=index, **settings)


def test_a_local_folder_loads_frozen_with_a_left_padding_tokenizer(tiny_model: Path) -> None:
    model = load_causal_lm(str(tiny_model))
    tokenizer = load_tokenizer(str(tiny_model))
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None
    assert not any(p.requires_grad for p in model.parameters())


def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="no such folder"):
        load_causal_lm(str(tmp_path / "nowhere"))


def test_an_uncached_hub_id_offline_says_nothing_could_be_downloaded(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelUnavailableError) as err:
        load_tokenizer("agilerl-tests/not-a-cached-model")
    message = str(err.value)
    assert "nothing could be downloaded" in message
    assert "pretrained_model_name_or_path" in message


def test_lora_config_from_a_mapping_or_a_peft_object() -> None:
    from peft import LoraConfig

    from_dict = lora_config(LORA)
    assert from_dict.r == 4 and from_dict.lora_alpha == 8
    assert set(from_dict.target_modules) == {"q_proj", "v_proj"}
    from_object = lora_config(LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
    assert from_object.r == 2
    with pytest.raises(ValueError, match="rank"):
        lora_config({**LORA, "rank": 3})


def test_lora_targets_resolve_to_the_model_with_notices_for_gemma_style_names(
        tiny_model: Path) -> None:
    from agilerl.llm.errors import LLMSettingError
    from agilerl.llm.model import LLMFallbackWarning, resolve_lora_targets

    model = load_causal_lm(str(tiny_model))
    plain = resolve_lora_targets(model, lora_config(LORA))
    assert plain.target_modules == [f"model.layers.{i}.self_attn.{p}"
                                    for i in (0, 1) for p in ("q_proj", "v_proj")]
    gemma = lora_config({**LORA, "target_modules": ["q_proj.linear", "v_proj.linear"]})
    with pytest.warns(LLMFallbackWarning) as record:
        scoped = resolve_lora_targets(model, gemma, scope="language_model")
    assert scoped.target_modules == plain.target_modules
    messages = " ".join(str(r.message) for r in record)
    assert "no 'language_model' sub-model" in messages and "'q_proj.linear'" in messages
    with pytest.raises(LLMSettingError, match="'wq' matches no module.*q_proj"):
        resolve_lora_targets(model, lora_config({**LORA, "target_modules": ["wq"]}))


def test_a_population_shares_one_base_and_adds_only_adapters(tiny_model: Path) -> None:
    first = _grpo(tiny_model)
    base_params = sum(p.numel() for p in first.base.model.parameters())
    adapter_params = sum(p.numel() for p in first.base.parameters(first.adapter))
    others = [_grpo(tiny_model, i) for i in range(1, 4)]
    assert all(agent.base is first.base for agent in others)
    assert len({agent.adapter for agent in [first, *others]}) == 4
    total = sum(p.numel() for p in first.base.peft.parameters())
    # The base once, plus four adapters (the base's own count includes the first adapter,
    # which peft injects into its modules).
    assert total == base_params + 3 * adapter_params


def test_selection_copies_an_adapter_into_another_member(tiny_model: Path) -> None:
    parent, child = _grpo(tiny_model, 0), _grpo(tiny_model, 1)
    with torch.no_grad():
        for param in parent.base.parameters(parent.adapter):
            param.add_(0.5)
    copy = type(child).from_state(parent.get_state())
    theirs = parent.base.adapter_state(parent.adapter)
    mine = copy.base.adapter_state(copy.adapter)
    assert copy.adapter != parent.adapter
    assert all(torch.equal(theirs[k], mine[k]) for k in theirs)
    with torch.no_grad():  # the copy owns its weights
        copy.base.parameters(copy.adapter)[0].add_(1.0)
    assert torch.equal(parent.base.adapter_state(parent.adapter)[next(iter(theirs))],
                       theirs[next(iter(theirs))])


def test_a_dropped_member_frees_its_adapter(tiny_model: Path) -> None:
    import gc

    keep, drop = _grpo(tiny_model, 0), _grpo(tiny_model, 1)
    name = drop.adapter
    del drop
    gc.collect()
    assert name not in keep.base.lora_configs
    assert not keep.base.parameters(name)


def test_learning_rate_mutation_reaches_the_optimizer(tiny_model: Path) -> None:
    agent = _grpo(tiny_model)
    agent.set_hyperparameter("lr", 0.02)
    assert agent.optimizer.param_groups[0]["lr"] == 0.02
    assert agent.mutable_networks() == []
    with pytest.raises(ValueError, match="cannot mutate"):
        _grpo(tiny_model, hp_config={"lora_r": {"min": 1, "max": 2}})


def test_network_mutations_are_turned_off_with_a_warning() -> None:
    from agilerl.models import MutationSpec
    from agilerl.training.llm import network_mutations_off

    spec = MutationSpec.model_validate({"probabilities": {"no_mut": 0.4, "arch_mut": 0.2,
                                                         "rl_hp_mut": 0.4}})
    with pytest.warns(UserWarning, match="arch_mut = 0.2"):
        turned_off = network_mutations_off(spec)
    assert turned_off is not None
    probs = turned_off.probabilities
    moved = spec.probabilities.arch_mut + spec.probabilities.params_mut \
        + spec.probabilities.act_mut
    assert probs.arch_mut == probs.params_mut == probs.act_mut == 0
    assert probs.no_mut == pytest.approx(0.4 + moved) and probs.rl_hp_mut == 0.4


def test_without_the_llm_extra_building_a_member_names_the_install(monkeypatch) -> None:
    import importlib.util

    from agilerl.algorithms import algorithm_class
    from agilerl.core.errors import MissingExtraError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "peft" else real(name, *a))
    with pytest.raises(MissingExtraError, match=r"pip install 'agilerl\[llm\]'"):
        algorithm_class("GRPO")(group_size=2)


def test_agilerl_imports_without_the_llm_extra() -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules.update(transformers=None, peft=None, datasets=None, "
            "accelerate=None); import agilerl.algorithms.grpo, agilerl.training.llm, "
            "agilerl.llm.adapters, agilerl.llm.multiturn, agilerl.training.llm_multiturn; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr
