"""Manifests of the LLM tests: the tiny model on the local token task."""

from __future__ import annotations

from pathlib import Path

#: Hyperparameters that keep a test step small, per algorithm family.
SMALL = {"batch_size": 2, "max_output_tokens": 4, "temperature": 1.0,
         "gradient_checkpointing": False}
GROUP_ALGOS = ("GRPO", "GSPO", "CISPO")
RL_ALGOS = ("GRPO", "GSPO", "CISPO", "LLMPPO", "LLMREINFORCE")


def algorithm_settings(name: str, **extra: object) -> dict[str, object]:
    """Small settings of algorithm ``name`` (a learning rate under its own field name)."""
    settings: dict[str, object] = {"name": name, **SMALL}
    if name in GROUP_ALGOS:
        settings.update(group_size=2, lr=0.01)
    elif name == "LLMPPO":
        settings.update(lr_actor=0.01, lr_critic=0.01)
    else:
        settings.update(lr=0.01)
    settings.update(extra)
    return settings


def reasoning_manifest(model: Path, task: Path, name: str = "GRPO", *,
                       algorithm: dict[str, object] | None = None,
                       training: dict[str, object] | None = None,
                       pop_size: int = 2, evolve: bool = True,
                       reward: str = "lowercase_share") -> dict[str, object]:
    """A manifest training ``name`` on the token task with the tiny model (``reward``: a
    function of the task's reward file; the default gives every batch a learning signal)."""
    manifest: dict[str, object] = {
        "algorithm": algorithm_settings(name, **(algorithm or {})),
        "environment": {
            "env_type": "reasoning", "dataset": str(task),
            "reward_file_path": str(task.parent / "reward.py"), "reward_fn_name": reward,
            "prompt_template": {"system_0": "Be brief.", "user_1": "{question}"},
            "max_reward": 1.0, "train_test_split": 0.75,
        },
        "training": {"max_steps": 2, "evo_steps": 1, "pop_size": pop_size,
                     "evaluation_interval": 1, **(training or {})},
        "network": {"pretrained_model_name_or_path": str(model), "max_context_length": 96,
                    "lora_config": {"lora_r": 4, "lora_alpha": 8,
                                    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
                                    "lora_dropout": 0.0, "task_type": "CAUSAL_LM"}},
    }
    if evolve:
        lr_name = "lr_actor" if name == "LLMPPO" else "lr"
        manifest["mutation"] = {
            "probabilities": {"no_mut": 0.5, "arch_mut": 0, "new_layer": 0, "params_mut": 0,
                              "act_mut": 0, "rl_hp_mut": 0.5},
            "rl_hp_selection": {lr_name: {"min": 0.001, "max": 0.05},
                                "beta": {"min": 0.0001, "max": 0.01}},
            "rand_seed": 1,
        }
        manifest["selection_strategy"] = {"tournament_size": 2, "elitism": True}
    return manifest
