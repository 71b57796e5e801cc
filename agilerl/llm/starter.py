"""``agilerl llm tiny-model DIR``: a tiny local model and toy datasets for the LLM manifests.

Nothing is downloaded: the model is randomly initialised and the tokenizer built from the
printable ASCII characters (:mod:`agilerl.llm.tiny`), so LLM fine-tuning can be tried, and
tested, on a machine without network. The folder holds::

    DIR/model/             a Llama-style causal LM (~0.3 M parameters) and its tokenizer
    DIR/countdown.jsonl    GRPO, GSPO, CISPO, LLMPPO, LLMREINFORCE: nums, target (+ a solution)
    DIR/preference.jsonl   DPO: prompt, chosen, rejected
    DIR/sft.jsonl          SFT: prompt, response
    DIR/README.md          the commands that train the shipped manifests on them

The same seed writes the same bytes. :func:`overrides_for` gives the dotted overrides that
point a shipped manifest (``configs/training/llm/``) at the folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agilerl.llm.tiny import (
    build_tiny_model,
    countdown_rows,
    preference_rows,
    sft_rows,
    write_records,
)

__all__ = [
    "QUICK_BUDGET",
    "QUICK_EXTRA",
    "StarterFolderError",
    "StarterKit",
    "overrides_for",
    "walkthrough",
    "write_starter",
]

#: Size of the written model (hidden size, layers, heads, positions): ~0.3 M parameters,
#: fast enough for a CPU run of seconds, with room for multi-turn conversations.
MODEL_SIZE = (128, 2, 4, 2048)
#: Overrides that shorten a shipped manifest's run to seconds (two steps per member).
QUICK_BUDGET = ("training.max_steps=2", "training.evo_steps=1")
#: Further ones per ``env_type``: the reasoning manifests sample 256 tokens per completion,
#: which the random tiny model spends on noise (about 10 s per step on a shared 2-core CPU).
QUICK_EXTRA = {"reasoning": ("algorithm.max_output_tokens=32",)}
#: Shipped manifest (under ``configs/training/llm/``) -> its ``env_type``.
SHIPPED = {"grpo": "reasoning", "dpo": "preference", "sft": "sft",
           "grpo_multiturn": "multiturn", "gspo": "reasoning", "cispo": "reasoning",
           "llmppo": "reasoning", "llmreinforce": "reasoning"}


class StarterFolderError(ValueError):
    """The folder cannot take the starter files (not empty without ``force``, or a file)."""


@dataclass(frozen=True)
class StarterKit:
    """Where :func:`write_starter` put each part."""

    folder: Path
    model: Path
    countdown: Path
    preference: Path
    sft: Path


def _layout(folder: Path) -> StarterKit:
    return StarterKit(folder=folder, model=folder / "model",
                      countdown=folder / "countdown.jsonl",
                      preference=folder / "preference.jsonl", sft=folder / "sft.jsonl")


def overrides_for(env_type: str, folder: str | os.PathLike[str]) -> list[str]:
    """The overrides pointing a shipped manifest of ``env_type`` at the starter ``folder``
    (written as given, so ``/tmp/tiny`` stays ``/tmp/tiny`` in documentation)."""
    base = str(folder).rstrip("/") or "/"
    kit = {"model": f"{base}/model", "countdown": f"{base}/countdown.jsonl",
           "preference": f"{base}/preference.jsonl", "sft": f"{base}/sft.jsonl"}
    model = [f"network.pretrained_model_name_or_path={kit['model']}"]
    if env_type == "reasoning":  # the manifest's own reward.py scores Countdown answers
        return [*model, f"environment.dataset={kit['countdown']}"]
    if env_type == "preference":
        return [*model, f"environment.dataset={kit['preference']}"]
    if env_type == "sft":
        return [*model, f"environment.dataset={kit['sft']}", "environment.response_column=response"]
    if env_type == "multiturn":  # the game is built in: nothing to point at but the model
        return model
    raise ValueError(f"no starter data for env_type {env_type!r}")


def walkthrough(folder: str | os.PathLike[str], names: tuple[str, ...] = ("grpo", "dpo", "sft",
                                                                            "grpo_multiturn"),
                ) -> list[str]:
    """``agilerl train`` command lines training shipped manifests on the starter ``folder``
    for two steps per member (run from an agilerl checkout)."""
    return [" ".join(["agilerl train", f"configs/training/llm/{name}.yaml",
                      *overrides_for(SHIPPED[name], folder), *QUICK_BUDGET,
                      *QUICK_EXTRA.get(SHIPPED[name], ())])
            for name in names]


def _check_folder(folder: Path, force: bool) -> None:
    if folder.exists() and not folder.is_dir():
        raise StarterFolderError(f"{folder} exists and is not a folder")
    if folder.is_dir() and not force:
        entries = sorted(p.name for p in folder.iterdir())
        if entries:
            shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
            count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
            raise StarterFolderError(
                f"{folder} is not empty ({count}: {shown}); choose an empty or "
                "new folder, or pass --force to write the starter files into it anyway")


def write_starter(folder: str | os.PathLike[str], *, seed: int = 0,
                  force: bool = False) -> StarterKit:
    """Write the tiny model, its tokenizer and the toy datasets to ``folder``.

    Raises :class:`StarterFolderError` when ``folder`` is a file, or is not empty and
    ``force`` is false (``force`` overwrites the starter's own files and leaves others).
    The same ``seed`` writes the same bytes.
    """
    kit = _layout(Path(folder))
    _check_folder(kit.folder, force)
    kit.folder.mkdir(parents=True, exist_ok=True)
    hidden, layers, heads, positions = MODEL_SIZE
    build_tiny_model(kit.model, hidden_size=hidden, layers=layers, heads=heads,
                     max_positions=positions, seed=seed)
    write_records(kit.countdown, [{**row, "solution": " + ".join(map(str, row["nums"]))}
                                  for row in countdown_rows(64, seed)])
    write_records(kit.preference, preference_rows(48, seed))
    write_records(kit.sft, sft_rows(48, seed + 1))
    (kit.folder / "README.md").write_text(_readme(kit.folder))
    return kit


def _readme(folder: Path) -> str:
    commands = "\n".join(walkthrough(folder))
    return (
        "# A tiny local LLM and toy datasets (written by `agilerl llm tiny-model`)\n\n"
        "A randomly initialised Llama-style model with a character-level tokenizer: it "
        "trains in seconds on a CPU, and learns only what these datasets teach it.\n\n"
        "- `model/`: the model and tokenizer (`network.pretrained_model_name_or_path`)\n"
        "- `countdown.jsonl`: GRPO/GSPO/CISPO/LLMPPO/LLMREINFORCE (`nums`, `target`; the "
        "shipped manifests' `reward.py` scores the equations)\n"
        "- `preference.jsonl`: DPO (`prompt`, `chosen`, `rejected`)\n"
        "- `sft.jsonl`: SFT (`prompt`, `response`)\n\n"
        "From an agilerl checkout, each command trains two steps per member:\n\n"
        f"```bash\n{commands}\n```\n"
    )
