"""SFT and DPO on a tiny local model: they learn (held-out loss, preference accuracy), DPO's
reference policy (base or separate adapter), hyperparameters, and exact state round trips."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agilerl.algorithms.dpo import DPO  # noqa: E402
from agilerl.algorithms.sft import SFT  # noqa: E402
from agilerl.llm.dataset_envs import make_dataset_env  # noqa: E402
from agilerl.llm.tiny import write_preference_set, write_sft_set  # noqa: E402
from agilerl.models import LLMEnvSpec  # noqa: E402

LORA = {"lora_r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj",
                                                         "o_proj"], "lora_dropout": 0.0}


def _agent(cls, tiny_model: Path, **hp):
    hp = {"batch_size": 8, "lr": 5e-3, "max_grad_norm": 1.0, "lora_config": LORA,
          "max_model_len": 64, **hp}
    return cls(index=0, device="cpu", seed=0,
               pretrained_model_name_or_path=str(tiny_model), **hp)


def _env(agent, path: Path, env_type: str, **fields):
    spec = LLMEnvSpec(env_type=env_type, dataset=str(path), train_test_split=0.75, **fields)
    return make_dataset_env(spec, agent.tokenizer, max_context_length=64, seed=0)


def _train(agent, env, steps: int) -> list[dict]:
    out = []
    for _ in range(steps):
        step = agent.steps[-1]
        if hasattr(agent, "sync_reference"):
            agent.sync_reference(env.epoch_of(step, int(agent.batch_size)))
        out.append(agent.learn(env.train_batch(step, int(agent.batch_size))))
        agent.steps[-1] += 1
    return out


def test_sft_lowers_held_out_loss(tiny_model: Path, tmp_path: Path) -> None:
    agent = _agent(SFT, tiny_model, lr=2e-2)
    env = _env(agent, write_sft_set(tmp_path), "sft")
    before = agent.held_out_loss(env)
    metrics = _train(agent, env, 30)
    after = agent.held_out_loss(env)
    # the tiny model's small random embeddings bound how far its logits move: ln(vocab)
    # 4.6 -> about 4.2 is the most LoRA on its attention can do
    assert after < before - 0.25, (before, after)
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    assert agent.evaluate_dataset(env) == pytest.approx(-after)


def test_dpo_raises_held_out_preference_accuracy(tiny_model: Path, tmp_path: Path) -> None:
    agent = _agent(DPO, tiny_model, beta=0.1)
    env = _env(agent, write_preference_set(tmp_path), "preference")
    start = agent.held_out_preferences(env)
    assert start.accuracy == 0.0 and float(start.margins.abs().max()) < 1e-5  # policy == ref
    metrics = _train(agent, env, 12)
    end = agent.held_out_preferences(env)
    assert end.accuracy == 1.0 and float(end.margins.mean()) > 0.05
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    assert agent.evaluate_dataset(env) == 1.0


def test_dpo_reference_is_the_base_without_adapters(tiny_model: Path, tmp_path: Path) -> None:
    agent = _agent(DPO, tiny_model, beta=0.1)
    env = _env(agent, write_preference_set(tmp_path), "preference")
    batch = env.train_batch(0, 8)
    reference = agent.reference_log_probs(batch.tokens)
    _train(agent, env, 3)
    assert torch.equal(agent.reference_log_probs(batch.tokens), reference)
    assert not torch.allclose(agent.policy_log_probs(batch.tokens), reference)


def test_separate_reference_adapter_is_frozen_then_synced_each_pass(tiny_model: Path,
                                                                   tmp_path: Path) -> None:
    agent = _agent(DPO, tiny_model, beta=0.1, use_separate_reference_adapter=True)
    env = _env(agent, write_preference_set(tmp_path, rows=32), "preference")  # 3 batches/pass
    assert env.batches_per_epoch(8) == 3
    batch = env.train_batch(0, 8)
    reference = agent.reference_log_probs(batch.tokens)
    _train(agent, env, 3)  # one pass: the reference adapter does not move
    assert torch.equal(agent.reference_log_probs(batch.tokens), reference)
    policy = agent.policy_log_probs(batch.tokens)
    _train(agent, env, 1)  # a new pass starts: reference := the member as it was then
    assert torch.allclose(agent.reference_log_probs(batch.tokens), policy, atol=1e-5)
    assert agent.reference_epoch == 1


def test_dpo_beta_is_a_mutable_hyperparameter(tiny_model: Path, tmp_path: Path) -> None:
    agent = _agent(DPO, tiny_model, beta=0.1)
    env = _env(agent, write_preference_set(tmp_path), "preference")
    _train(agent, env, 4)
    low = agent.held_out_preferences(env)
    agent.set_hyperparameter("beta", 0.2)
    high = agent.held_out_preferences(env)
    assert torch.allclose(high.margins, 2 * low.margins, atol=1e-6)
    assert float(high.loss) < float(low.loss)  # positive margins, doubled


@pytest.mark.parametrize("separate", [False, True])
def test_dpo_state_round_trip_continues_exactly(tiny_model: Path, tmp_path: Path,
                                                separate: bool) -> None:
    agent = _agent(DPO, tiny_model, beta=0.1, use_separate_reference_adapter=separate)
    env = _env(agent, write_preference_set(tmp_path, rows=32), "preference")
    _train(agent, env, 4)
    twin = DPO.from_state(agent.get_state())
    expected = _train(agent, env, 3)
    assert _train(twin, env, 3) == expected
    batch = env.train_batch(0, 8)
    assert torch.equal(twin.policy_log_probs(batch.tokens), agent.policy_log_probs(batch.tokens))
    assert torch.equal(twin.reference_log_probs(batch.tokens),
                       agent.reference_log_probs(batch.tokens))


def test_sft_chunked_update_matches_the_whole_batch(tiny_model: Path, tmp_path: Path) -> None:
    whole = _agent(SFT, tiny_model)
    chunked = SFT.from_state({**whole.get_state(),
                              "spec": {**whole.get_state()["spec"], "chunk_rows": 3}})
    env = _env(whole, write_sft_set(tmp_path), "sft")
    a, b = _train(whole, env, 2), _train(chunked, env, 2)
    assert a[0]["loss"] == pytest.approx(b[0]["loss"], rel=1e-5)
    assert whole.held_out_loss(env) == pytest.approx(chunked.held_out_loss(env), rel=1e-4)


@pytest.mark.parametrize("cls", [SFT, DPO])
def test_dpo_and_sft_members_generate(tiny_model: Path, cls) -> None:
    agent = _agent(cls, tiny_model, max_model_len=24)
    prompt = agent.tokenizer("Q12?")["input_ids"]
    greedy = agent.generate([prompt], greedy=True, max_new_tokens=4)
    assert greedy.completion_ids.shape == (1, 4) and len(greedy.texts) == 1
    sampled = agent.generate([prompt, prompt], group_size=2)  # up to max_model_len
    assert sampled.ids.shape[0] == 4 and sampled.ids.shape[1] <= 24


@pytest.mark.parametrize(("cls", "field", "value"), [
    (SFT, "beta", 0.5), (SFT, "use_separate_reference_adapter", True),
    (DPO, "vllm_importance_sampling_cap", 3.0),
])
def test_settings_dpo_and_sft_do_not_read_are_named_in_a_warning(cls, field, value) -> None:
    from agilerl.training.paradigms import check_settings

    spec = cls.spec_class()(**{field: value})
    with pytest.warns(UserWarning, match=f"algorithm.{field} = .* has no effect"):
        check_settings(cls, spec)
