"""What the process-pool driver does to its own memory before and while workers run."""

from __future__ import annotations

import copy
import gc
import sys
import threading

import pytest

from agilerl.population.resident_pages import (
    _clean_readonly_file_ranges,
    release_library_pages,
)
from tests.training.conftest import TINY_DQN

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


def test_the_driver_keeps_its_objects_frozen_while_forked_workers_run() -> None:
    from agilerl.training.trainer import LocalTrainer

    if threading.active_count() != 1 or gc.get_freeze_count():
        pytest.skip("workers would not fork from this process, or it froze objects itself")
    trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_DQN), seed=3)
    frozen_during: list[int] = []
    from agilerl.population.pool import ProcessPopulation

    original = ProcessPopulation.evaluate_members

    def spy(self, jobs):  # type: ignore[no-untyped-def]
        frozen_during.append(gc.get_freeze_count())
        return original(self, jobs)

    with pytest.MonkeyPatch().context() as patch:
        patch.setattr(ProcessPopulation, "evaluate_members", spy)
        trainer.train(verbose=False, num_workers=2)
    assert frozen_during and all(count > 0 for count in frozen_during)
    assert gc.get_freeze_count() == 0  # given back to the collector when the workers stopped
