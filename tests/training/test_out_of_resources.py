"""A full disk while checkpointing and too little memory for the networks a manifest asks
for end ``agilerl train`` with exit status 5 and one message naming what ran out (the file
being written, the network field), not exit 3 "internal error"; what was saved before stays
as it was. The limits are set on the child process only (``RLIMIT_FSIZE``: a write past it
fails as a full disk does; ``RLIMIT_AS``: allocations past it fail)."""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agilerl.checkpoint import read_checkpoint
from agilerl.training.trainer import LocalTrainer

from .conftest import TINY_DQN

REPO = Path(__file__).resolve().parents[2]
EXIT_NO_RESOURCES = 5
MANIFEST = {**TINY_DQN, "training": {**TINY_DQN["training"], "pop_size": 2,
                                     "max_steps": 400, "evo_steps": 200}}


def _train(manifest: dict, *args: object, cwd: Path, rlimit: tuple[int, int]
           ) -> subprocess.CompletedProcess:
    path = cwd / "manifest.yaml"
    path.write_text(yaml.safe_dump(manifest))

    def limit() -> None:
        resource.setrlimit(rlimit[0], (rlimit[1], rlimit[1]))

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "agilerl.train", str(path), "--no-verbose",
                           *map(str, args)], cwd=cwd, env=env, preexec_fn=limit,
                          capture_output=True, text=True, timeout=180)


def _address_space_after_imports() -> int:
    """Bytes of address space a process has once torch and the trainer are imported (it
    depends on the torch build, so it is measured, not assumed)."""
    probe = ("import agilerl.cli.train, agilerl.training.trainer, torch; print(next(int("
             "line.split()[1]) for line in open('/proc/self/status') "
             "if line.startswith('VmPeak')))")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return int(done.stdout) * 1024


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_disk_full_while_checkpointing_names_the_file_and_loses_nothing(tmp_path):
    checkpoints = tmp_path / "ck"
    LocalTrainer.from_manifest(manifest=MANIFEST, seed=1).train(
        verbose=False, checkpoint_steps=200, checkpoint_path=checkpoints)
    before = _digests(checkpoints)
    first = sorted(checkpoints.iterdir())[0]
    # Member files are ~34 kB: the resumed run's next checkpoint cannot be written.
    done = _train(MANIFEST, "--seed", 1, "--run-dir", tmp_path / "run",
                  "--checkpoint-steps", 200, "--checkpoint-path", checkpoints,
                  "--resume-from-checkpoint", first, cwd=tmp_path,
                  rlimit=(resource.RLIMIT_FSIZE, 20_000))
    assert done.returncode == EXIT_NO_RESOURCES, done.stderr
    assert "out of disk space writing" in done.stderr and "member_0.pt" in done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert _digests(checkpoints) == before  # nothing saved was touched, nothing half-written
    for folder in checkpoints.iterdir():
        read_checkpoint(folder)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_out_of_memory_building_the_network_names_the_field(tmp_path):
    manifest = {**MANIFEST, "network": {
        "latent_dim": 16, "head_config": {"hidden_size": [16]},
        "encoder_config": {"hidden_size": [8192, 8192], "max_mlp_nodes": 8192}}}
    # Two agents with an 8192x8192 layer (and their targets) need ~1 GiB beyond what the
    # imports take; building the environment and a small population takes ~30 MiB.
    done = _train(manifest, "--run-dir", tmp_path / "run", cwd=tmp_path,
                  rlimit=(resource.RLIMIT_AS, _address_space_after_imports() + (400 << 20)))
    assert done.returncode == EXIT_NO_RESOURCES, done.stderr
    assert "out of memory building 2 DQN agents" in done.stderr
    assert "network.encoder_config.hidden_size=[8192, 8192]" in done.stderr
    assert "Traceback" not in done.stderr
