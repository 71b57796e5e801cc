"""Every LLM RL manifest a reference user brings trains unchanged through the CLI.

Each GRPO/GSPO/CISPO/LLMPPO/LLMREINFORCE manifest under ``shared/peer-manifests`` runs as
``python -m agilerl.train MANIFEST`` with only ``network.pretrained_model_name_or_path``
pointed at a tiny local model and, for the dataset-based ones, ``environment.dataset`` at a
local Countdown-style Parquet file with the same columns and ``environment.reward_file_path``
at a local reward file; the budget is one step. The run must exit 0, write
a checkpoint and save an elite adapter that loads onto the base model and generates.
Multi-turn manifests play GEM games (``gem-llm``, offline) and quantisation and vLLM
settings fall back on CPU with a notice. All but one are ``slow``: each generates long
completions (up to the manifests' ``max_output_tokens``) with the tiny model.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

REPO = Path(__file__).resolve().parents[2]
PEER = REPO.parent / "shared" / "peer-manifests"
LLM = "configs/llm_finetuning"

#: Manifest -> (dataset-based, runs in the default suite).
MANIFESTS: dict[str, tuple[bool, bool]] = {
    "grpo.yaml": (True, True),
    "gspo.yaml": (True, False),
    "cispo.yaml": (True, False),
    "ppo_llm.yaml": (True, False),
    "ppo_llm_quant_bench.yaml": (True, False),
    "reinforce_llm.yaml": (True, False),
    "grpo_multiturn.yaml": (False, False),
    "cispo_quant_bench.yaml": (False, False),
    "cispo_quant_bench_qwen.yaml": (False, False),
    "cispo_gemma4_group5.yaml": (False, False),
    "reinforce_quant_bench.yaml": (False, False),
}


def _params() -> list[object]:
    return [pytest.param(name, marks=[] if fast else [pytest.mark.slow], id=name)
            for name, (_, fast) in MANIFESTS.items()]


@pytest.fixture(scope="module")
def local_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny model whose context holds a Sudoku prompt, its tokenizer trained on the
    manifests' prompt templates, and a Countdown task."""
    import yaml

    from agilerl.llm.tiny import build_tiny_model, write_countdown_task

    corpus = []
    for name in MANIFESTS:
        template = yaml.safe_load((PEER / LLM / name).read_text())["environment"] \
            .get("prompt_template") or {}
        corpus.extend(str(text) for text in template.values())
    model = build_tiny_model(tmp_path_factory.mktemp("model"), max_positions=4096,
                             corpus=corpus)
    dataset = write_countdown_task(tmp_path_factory.mktemp("countdown"))
    return {"model": model, "dataset": dataset, "reward": dataset.parent / "reward.py"}


@pytest.mark.skipif(not PEER.is_dir(), reason="shared/peer-manifests is not beside this checkout")
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", _params())
def test_peer_llm_manifest_trains_checkpoints_and_elite_generates(
        name: str, local_files: dict[str, Path], tmp_path: Path) -> None:
    if not MANIFESTS[name][0]:
        pytest.importorskip("gem", reason="multi-turn GEM games need gem-llm")
    run_dir = tmp_path / "run"
    overrides = [f"network.pretrained_model_name_or_path={local_files['model']}",
                 "training.max_steps=1", "training.evo_steps=1"]
    if MANIFESTS[name][0]:
        overrides += [f"environment.dataset={local_files['dataset']}",
                      f"environment.reward_file_path={local_files['reward']}"]
    env = dict(os.environ, WANDB_MODE="offline", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(PEER / LLM / name), "--no-verbose",
         "--seed", "3", "--run-dir", str(run_dir), "--save-elite", "--checkpoint-steps", "1",
         *overrides],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    checkpoints = [p for p in (run_dir / "checkpoints").iterdir() if (p / "index.json").is_file()]
    assert checkpoints, "no checkpoint was written"
    _elite_generates(run_dir, local_files["model"])


def _elite_generates(run_dir: Path, model: Path) -> None:
    """The elite adapter loads onto the base model and generates; so does the elite file."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agilerl.algorithms.core.llm_base import LLMAlgorithm

    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model),
                                        run_dir / "elite_adapter")
    tokenizer = AutoTokenizer.from_pretrained(model)
    ids = tokenizer("12 + 7 =", return_tensors="pt")
    out = adapted.generate(**ids, max_new_tokens=4, do_sample=False,
                           pad_token_id=tokenizer.pad_token_id)
    assert out.shape[1] > ids["input_ids"].shape[1]
    elite = LLMAlgorithm.load(run_dir / "elite.pt")
    assert len(elite.generate([ids["input_ids"][0].tolist()], greedy=True,
                              max_new_tokens=4).texts) == 1
