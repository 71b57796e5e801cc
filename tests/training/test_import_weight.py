"""A training run imports only what it uses: no optional integration, and none of torch's
compiler stack, is loaded by a run that does not ask for it (each would cost the run, and
every worker process forked from it, tens of megabytes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Modules a plain run must not load: torch.compile's stack (``torch.optim`` optimizers
#: import it on first use; ours do not), loggers that were not asked for, data and model
#: libraries of other paradigms, and the Ray backend.
UNUSED = ("torch._dynamo", "torch._inductor", "torch.onnx", "sympy", "wandb",
          "torch.utils.tensorboard", "tensorboard", "pandas", "pyarrow", "scipy",
          "matplotlib", "transformers", "datasets", "peft", "minari", "ray", "h5py")

_RUN = """
import json, sys
from agilerl.training.trainer import LocalTrainer
manifest = json.loads(sys.argv[1])
LocalTrainer.from_manifest(manifest=manifest, seed=0).train(verbose=True, num_workers=1)
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


def _loaded(manifest: dict, watched: tuple[str, ...]) -> list[str]:
    env = dict(os.environ, WANDB_MODE="offline", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", _RUN, json.dumps(manifest),
                           json.dumps(list(watched))], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_off_policy_run_loads_nothing_it_does_not_use():
    from tests.training.conftest import TINY_DQN

    assert _loaded(TINY_DQN, UNUSED) == []


@pytest.mark.parametrize("unused", [tuple(m for m in UNUSED if m != "h5py")])
def test_an_offline_run_loads_only_its_dataset_reader(tmp_path, unused):
    from tests.training.test_offline_bandit_runs import cqn_manifest, write_cartpole_hdf5

    manifest = cqn_manifest(write_cartpole_hdf5(tmp_path / "cartpole.h5"))
    assert _loaded(manifest, (*unused, "h5py")) == ["h5py"]
