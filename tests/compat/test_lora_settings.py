"""LoRA settings given as Python objects, as users of the reference library write them: a
PEFT ``LoraConfig`` (or an object with its attributes) becomes the manifest's LoRA keys,
and a set of target modules becomes a sorted list, so the spec dumps to plain JSON."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from agilerl.models import FinetuningNetworkSpec
from agilerl.models.networks import LoraConfigDict


def _spec(lora: object) -> FinetuningNetworkSpec:
    return FinetuningNetworkSpec(pretrained_model_name_or_path="gpt2", max_context_length=512,
                                 lora_config=lora)


def test_an_object_with_peft_attributes_becomes_manifest_keys() -> None:
    lora = SimpleNamespace(r=4, lora_alpha=8, lora_dropout=0.1, target_modules={"v", "q"},
                           target_parameters=None, task_type=SimpleNamespace(value="SEQ_CLS"))
    dumped = _spec(lora).model_dump(mode="json")["lora_config"]
    assert dumped == {"lora_r": 4, "lora_alpha": 8, "target_modules": ["q", "v"],
                      "target_parameters": None, "task_type": "SEQ_CLS", "lora_dropout": 0.1}
    json.dumps(dumped)
    assert _spec(dumped).lora_config == _spec(lora).lora_config  # round trip


def test_no_target_modules_means_every_linear_layer() -> None:
    lora = SimpleNamespace(r=4, lora_alpha=8, target_modules=None, task_type="CAUSAL_LM")
    assert _spec(lora).lora_config.target_modules == "all-linear"


def test_a_set_of_target_modules_dumps_sorted() -> None:
    assert LoraConfigDict(target_modules={"b", "a"}).model_dump(mode="json")["target_modules"] \
        == ["a", "b"]


def test_an_unrelated_object_is_still_refused() -> None:
    with pytest.raises(ValueError, match="lora_config"):
        _spec(object())


def test_a_peft_lora_config() -> None:
    peft = pytest.importorskip("peft")
    lora = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1, target_modules=["q_proj", "v_proj"],
                           task_type=peft.TaskType.CAUSAL_LM)
    settings = _spec(lora).lora_config
    assert (settings.lora_r, settings.lora_alpha, settings.lora_dropout) == (8, 16, 0.1)
    assert settings.target_modules == ["q_proj", "v_proj"] and settings.task_type == "CAUSAL_LM"

