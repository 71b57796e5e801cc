"""What the process-pool driver does to its own memory before and while workers run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agilerl.population.resident_pages import (
    _clean_readonly_file_ranges,
    release_library_pages,
)

SMAPS = """\
7f0000000000-7f0000002000 r--p 00000000 08:01 11 /lib/libtorch_cpu.so
Rss:                   8 kB
Anonymous:             0 kB
7f0000002000-7f0000006000 r-xp 00002000 08:01 11 /lib/libtorch_cpu.so
Rss:                  16 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
7f0000006000-7f0000007000 r--p 00006000 08:01 11 /lib/libtorch_cpu.so
Anonymous:             4 kB
7f0000007000-7f0000008000 rw-p 00007000 08:01 11 /lib/libtorch_cpu.so
Anonymous:             0 kB
7f0000008000-7f0000009000 rw-p 00000000 00:00 0
Anonymous:             4 kB
7f0000009000-7f000000a000 r--p 00000000 00:00 0 [vvar]
Anonymous:             0 kB
7f000000a000-7f000000b000 r--s 00000000 00:05 12 /dev/shm/data
Anonymous:             0 kB
"""


def test_only_read_only_file_mappings_without_private_pages_are_released() -> None:
    assert list(_clean_readonly_file_ranges(SMAPS)) == [
        (0x7F0000000000, 0x2000), (0x7F0000002000, 0x4000), (0x7F000000A000, 0x1000)]


def _resident_file_kb() -> int:
    with open("/proc/self/smaps_rollup") as fh:
        fields = dict(line.split()[:2] for line in fh if line.split()[0].endswith(":"))
    return int(fields["Rss:"]) - int(fields["Anonymous:"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and madvise")
def test_released_library_pages_leave_the_resident_set_and_still_work() -> None:
    import torch

    before = _resident_file_kb()
    assert release_library_pages() > 0
    assert _resident_file_kb() < before
    layer = torch.nn.Linear(4, 3)  # code and tables come back from the page cache
    layer(torch.ones(2, 4)).sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.shape == (3, 4)


#: Trains the tiny DQN manifest with 2 workers in a fresh interpreter (one whose only
#: thread is its main thread, so workers fork from it whatever threads earlier tests left
#: running) and prints the collector's freeze counts during evaluation and after the run.
_FROZEN_WHILE_WORKERS_RUN = """
import copy, gc, threading
from agilerl.population.pool import ProcessPopulation
from agilerl.training.trainer import LocalTrainer
from tests.training.conftest import TINY_DQN

assert threading.active_count() == 1 and gc.get_freeze_count() == 0
frozen_during = []
original = ProcessPopulation.evaluate_members

def spy(self, jobs):
    frozen_during.append(gc.get_freeze_count())
    return original(self, jobs)

ProcessPopulation.evaluate_members = spy
LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_DQN), seed=3).train(
    verbose=False, num_workers=2)
print(min(frozen_during), len(frozen_during), gc.get_freeze_count())
"""


def _printed_by_fresh_interpreter(script: str) -> list[str]:
    """What ``script``, run from the repository in a new Python process, prints (split)."""
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=repo,
                          env={**os.environ, "PYTHONPATH": str(repo)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_the_driver_keeps_its_objects_frozen_while_forked_workers_run() -> None:
    printed = _printed_by_fresh_interpreter(_FROZEN_WHILE_WORKERS_RUN)
    least_frozen, evaluations, frozen_after = map(int, printed[-3:])
    assert evaluations > 0 and least_frozen > 0  # frozen at every evaluation
    assert frozen_after == 0  # given back to the collector when the workers stopped


def test_every_process_of_the_pool_hands_back_its_library_pages_as_each_training_phase_begins(
        monkeypatch) -> None:
    import copy
    import multiprocessing

    from agilerl.population import pool, pool_worker
    from agilerl.population.pool import ProcessPopulation
    from agilerl.training.trainer import LocalTrainer
    from tests.training.conftest import TINY_DQN

    if not pool._can_fork_here("cpu"):
        pytest.skip("workers would start from a fork server, without this test's counters")
    driver = os.getpid()
    in_driver, in_workers = multiprocessing.Value("i", 0), multiprocessing.Value("i", 0)

    def counted() -> int:  # forked workers inherit it, and the shared counters
        with (in_driver if os.getpid() == driver else in_workers).get_lock():
            (in_driver if os.getpid() == driver else in_workers).value += 1
        return 0

    phases = []
    original = ProcessPopulation.evaluate_members

    def evaluate_members(self, jobs):
        phases.append(len(jobs))
        return original(self, jobs)

    monkeypatch.setattr(pool, "release_library_pages", counted)
    monkeypatch.setattr(pool_worker, "release_library_pages", counted)
    monkeypatch.setattr(ProcessPopulation, "evaluate_members", evaluate_members)
    LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_DQN), seed=3).train(
        verbose=False, num_workers=2)
    assert len(phases) >= 2
    assert in_driver.value == len(phases) + 1  # once before forking, then once a phase
    assert in_workers.value == len(phases)  # the worker process trains in every phase


#: In a fresh interpreter: the resident file-backed memory right after importing torch, and
#: after building a trainer (whose build hands back what loading the libraries touched).
_BUILT_IN_ONE_PROCESS = """
import copy
import torch
from tests.population.test_resident_pages import _resident_file_kb
loaded = _resident_file_kb()
from agilerl.training.trainer import LocalTrainer
from tests.training.conftest import TINY_DQN
trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_DQN), seed=3)
print(loaded, _resident_file_kb())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and madvise")
def test_a_trainer_hands_back_the_pages_loading_torch_touched() -> None:
    loaded, built = map(int, _printed_by_fresh_interpreter(_BUILT_IN_ONE_PROCESS)[-2:])
    # Building imports more libraries and touches some pages again, yet the process holds
    # tens of MB less of them than torch's loading left resident.
    assert built < loaded - 20_000, (loaded, built)
