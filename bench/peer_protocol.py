"""The interleaved protocol of ``bench/peer.py --repeat N``: what a loaded machine cannot inflate.

A speed ratio between two libraries is only a result when neither side was starved by
something else on the machine. So each run of the protocol records

* the 1-minute load average when it starts and when it ends, and waits (up to a limit)
  for the load left by the run before it to settle below the threshold before starting;
* the CPU seconds the rest of the machine took while it ran: the busy time of every core
  (``/proc/stat``, steal time included, since a hypervisor taking a core starves a run as
  surely as a process does), less the run's own CPU time (the driver and every descendant
  it reaped, ``RUSAGE_CHILDREN``) and this process's (the memory sampler).

Runs alternate ours, the reference, ours, ... (ABAB), so a slow drift of the machine reaches
both sides alike, and the summary gives the median ratio of the pairs with its range,
over all pairs and over the clean ones (started at or below the threshold).
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

#: Runs starting above this 1-minute load average are marked and left out of the clean median.
QUIET_LOAD = 1.5


@dataclass(frozen=True)
class HostSnapshot:
    """What the machine and this process had done at one moment."""

    load: float  # 1-minute load average
    busy_seconds: float  # all cores' non-idle time since boot (steal included)
    self_seconds: float  # this process's CPU time
    children_seconds: float  # CPU time of this process's reaped children (and theirs)


def _busy_seconds(stat_text: str) -> float:
    """Non-idle CPU seconds of all cores from ``/proc/stat``'s first line: user, nice,
    system, irq, softirq and steal (idle and iowait are not busy; guest time is inside user)."""
    fields = [int(x) for x in stat_text.splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def host_snapshot() -> HostSnapshot:
    """The load, the machine's busy time and this process's CPU use, now."""
    with open("/proc/stat") as fh:
        busy = _busy_seconds(fh.read())
    own, children = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return HostSnapshot(load=os.getloadavg()[0], busy_seconds=busy,
                        self_seconds=own.ru_utime + own.ru_stime,
                        children_seconds=children.ru_utime + children.ru_stime)


def run_accounting(before: HostSnapshot, after: HostSnapshot) -> dict[str, float]:
    """The CPU use of one run (between two snapshots around a child process that has been
    reaped) and of everything else on the machine meanwhile."""
    run_cpu = after.children_seconds - before.children_seconds
    sampler = after.self_seconds - before.self_seconds
    others = after.busy_seconds - before.busy_seconds - run_cpu - sampler
    # /proc/stat ticks at 1/CLK_TCK s per core, rusage more finely: a few ticks either way
    return {"load_start": before.load, "load_end": after.load, "run_cpu_seconds": run_cpu,
            "other_cpu_seconds": max(others, 0.0)}


def wait_for_quiet(threshold: float, max_wait: float, poll: float = 2.0,
                   load: Callable[[], float] = lambda: os.getloadavg()[0],
                   sleep: Callable[[float], None] = time.sleep) -> float:
    """Wait until the 1-minute load average is at most ``threshold`` (the load a previous
    run left decays with a one-minute time constant), for at most ``max_wait`` seconds;
    return the seconds waited."""
    waited = 0.0
    while load() > threshold and waited < max_wait:
        sleep(poll)
        waited += poll
    return waited


def schedule(repeat: int, libraries: list[str]) -> list[tuple[int, str]]:
    """(pair index, library) in run order: each of ``libraries`` in turn, ``repeat`` times
    (ours, the reference, ours, the reference, ...)."""
    return [(pair, library) for pair in range(repeat) for library in libraries]


def started_quiet(run: dict, threshold: float = QUIET_LOAD) -> bool:
    return run.get("load_start", 0.0) <= threshold


def median_and_range(values: list[float]) -> tuple[float, float, float] | None:
    """(median, lowest, highest) of ``values``; None when there are none."""
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def pair_ratios(pairs: list[tuple[dict, dict]], key: str) -> list[float]:
    """ours[key] / reference[key] for every pair where both runs succeeded."""
    out = []
    for ours, peer in pairs:
        if "error" in ours or "error" in peer:
            continue
        if ours.get(key) and peer.get(key):
            out.append(ours[key] / peer[key])
    return out


def summary_lines(pairs: list[tuple[dict, dict]], threshold: float = QUIET_LOAD) -> list[str]:
    """The protocol's verdict for one manifest: the median ratio of train steps/s and of
    peak memory with their range, over every pair and over the pairs whose two runs both
    started at or below ``threshold``."""
    clean = [(a, b) for a, b in pairs if started_quiet(a, threshold) and started_quiet(b, threshold)]
    lines = []
    for label, chosen in (("all pairs", pairs), (f"pairs started at load <= {threshold}", clean)):
        speeds = pair_ratios(chosen, "train_steps_per_second")
        speed, memory = median_and_range(speeds), median_and_range(pair_ratios(chosen, "peak_rss_mb"))
        if speed is None or memory is None:
            lines.append(f"  {label}: none")
            continue
        # the count is of pairs with a ratio: a pair with a failed run has none
        lines.append(f"  {label} ({len(speeds)}): steps/s ratio median {speed[0]:.2f}x "
                     f"(range {speed[1]:.2f}-{speed[2]:.2f}), memory ratio median "
                     f"{memory[0]:.2f}x (range {memory[1]:.2f}-{memory[2]:.2f})")
    return lines
