"""The reference's DPO and SFT manifests train unchanged through the CLI on local data.

``configs/llm_finetuning/dpo.yaml`` and ``configs/sft.yaml`` under ``shared/peer-manifests``
run as ``python -m agilerl.train MANIFEST`` with only ``network.pretrained_model_name_or_path``
pointed at a tiny local model, ``environment.dataset`` at a local Parquet file with the
columns of their hub dataset (``prompt``, ``chosen``, ``rejected``), and a small budget
(``training.evo_steps``; their ``num_epochs: 1`` bounds the run to one pass over the data).
Each must exit 0, write a checkpoint, and save an elite whose adapter loads onto the base
model and generates.
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

MANIFESTS = ["configs/llm_finetuning/dpo.yaml", "configs/sft.yaml"]


@pytest.fixture(scope="module")
def local_model_and_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny model folder and a Parquet file with the Human-Like-DPO-Dataset columns."""
    from agilerl.llm.tiny import build_tiny_model, write_preference_set

    folder = tmp_path_factory.mktemp("peer_llm_pref")
    return build_tiny_model(folder / "model"), write_preference_set(folder, rows=24)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(WANDB_MODE="offline", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO),
               HF_HUB_OFFLINE="1")
    return env


@pytest.mark.skipif(not PEER.is_dir(), reason="shared/peer-manifests is not beside this checkout")
@pytest.mark.parametrize("name", MANIFESTS)
def test_peer_llm_manifest_trains_checkpoints_and_elite_generates(
        name: str, local_model_and_data: tuple[Path, Path], tmp_path: Path) -> None:
    model, data = local_model_and_data
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(PEER / name), "--no-verbose", "--seed", "3",
         "--run-dir", str(run_dir), "--save-elite", "--checkpoint-steps", "2",
         f"network.pretrained_model_name_or_path={model}", f"environment.dataset={data}",
         "training.evo_steps=1"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    checkpoints = [p for p in (run_dir / "checkpoints").iterdir() if (p / "index.json").is_file()]
    assert checkpoints, "no checkpoint was written"
    _elite_adapter_generates(run_dir, model)


def _elite_adapter_generates(run_dir: Path, model_folder: Path) -> None:
    import torch
    from peft import PeftModel

    from agilerl.llm.model import load_causal_lm, load_tokenizer

    tokenizer = load_tokenizer(str(model_folder))
    model = PeftModel.from_pretrained(load_causal_lm(str(model_folder)),
                                      str(run_dir / "elite_adapter"))
    ids = torch.tensor([tokenizer("Q42?")["input_ids"]])
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4,
                         do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert out.shape[1] > ids.shape[1]
