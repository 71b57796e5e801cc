"""Check an uploaded environment against the Gymnasium or PettingZoo API, or profile it,
without running any of its code.

The environment runs in :mod:`.env_host`, a limited and sandboxed process that only
answers requests over a pipe in the data-only format of :mod:`.env_wire`. This module is
the other end, in the server: it rebuilds the spaces from their description, drives the
environment (``reset(seed)``, ``step(action)`` with actions it samples itself) and judges
every answer with the checks of :mod:`.env_api_checks`. So the verdict is computed where
no upload code runs: whatever the environment does to its own process (patch it, print,
write to its pipes, exit 0) can at most make a check fail. A host that dies or answers
malformed data fails the check that was running; the profile's figures are measured here
(steps/s of the batches of steps it asks for) and from outside the host (its CPU time
and memory, in /proc).

:func:`drive` reports as it goes, through ``emit``:

* ``{"start": CHECK}`` before each check (so a killed run still names the check it was in);
* ``{"check": CHECK, "success": bool, "warnings": [...], "error": str | null}`` after it;
* ``{"result": {...}}`` once at the end (the profile's metrics for ``mode: profile``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Literal, TypedDict, overload

from agilerl.arena.server.env_api_checks import (
    CheckFailed,
    GymChecks,
    ParallelChecks,
    checked_space,
)
from agilerl.arena.server.env_wire import (
    MAX_FRAME_BYTES,
    Decoder,
    Encoder,
    HostGone,
    PipeReader,
    Stopped,
    pack,
    write_all,
)

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject

#: steps of one random episode before it is cut short (an episode may never end).
MAX_EPISODE_STEPS = 1000
SMOKE_STEPS = 20
_ERROR_CHARS = 2000
#: the profile's random actions, and how many steps one request asks for (a batch doubles
#: while it takes under _BATCH_S).
_POOL, _MAX_BATCH, _BATCH_S = 64, 4096, 0.05
#: most steps of a random rollout one request asks for (each is checked here).
_MAX_ROLLOUT_BATCH = 64
#: what a check run found: the environment's class and episode figures, or the profile's
#: metrics.
Result = dict[str, str | float]


class CheckSpec(TypedDict, total=False):
    """What to check (or profile) and how: built by :mod:`.env_pipeline`."""

    mode: str
    source: str
    entrypoint: str
    config: JsonObject
    multi_agent: bool
    rollouts: int
    max_episode_steps: int
    seconds: float
    #: the host's resident memory before the environment was built (set by the checker).
    _rss_before: int


class CheckMessage(TypedDict, total=False):
    """One report of :func:`drive` (see the module's docstring)."""

    start: str
    check: str | None
    success: bool
    warnings: list[str]
    error: str | None
    result: Result


Emit = Callable[[CheckMessage], None]
#: ``reset`` was called without ``options`` (the host then passes none: not every
#: environment's ``reset`` takes it).
_ABSENT: object = object()


class Remote:
    """The checker's end of the pipe to one host process (``pid``)."""

    def __init__(self, pid: int, reader: PipeReader, write_fd: int) -> None:
        self.pid, self.reader, self.write_fd = pid, reader, write_fd
        self.last_frame_bytes = 0

    def batch(self, steps: int) -> int:
        """How many steps to ask for at once: ``steps`` or fewer, so that an answer of
        steps like the last ones stays well under the frame limit."""
        per_step = max(self.last_frame_bytes, 1)
        return max(1, min(steps, _MAX_ROLLOUT_BATCH, MAX_FRAME_BYTES // 4 // per_step))

    def call(self, op: str, **fields: object) -> object:
        """Send one request; the decoded value of the answer, or :class:`CheckFailed` when
        the environment raised or the answer is not data of the format."""
        encoder = Encoder()
        if "action" in fields:
            fields["action"] = encoder.encode(fields["action"])
        write_all(self.write_fd, pack({"op": op, **fields}, encoder.blobs), self.reader.stop)
        try:
            answer, blobs = self.reader.read()
            self.last_frame_bytes = sum(map(len, blobs)) + len(blobs) * 64
            if "error" in answer:
                raise CheckFailed(str(answer["error"])[:_ERROR_CHARS])
            if "value" not in answer:
                raise _malformed("an answer has neither a value nor an error")
            return Decoder(blobs).decode(answer["value"])
        except (HostGone, Stopped, CheckFailed):
            raise
        except Exception as exc:  # noqa: BLE001 - hostile data may break numpy or gymnasium
            raise _malformed(str(exc)[:_ERROR_CHARS]) from None


def _malformed(what: str) -> CheckFailed:
    return CheckFailed(f"the environment's process answered malformed data: {what}")


def _entry(entries: object, index: int) -> object:
    """One space from the host's ``spaces`` answer; the environment's error when fetching
    it raised."""
    entry = entries[index] if isinstance(entries, list) and index < len(entries) else None
    if not isinstance(entry, dict):
        raise _malformed("a space is missing")
    if "error" in entry:
        raise CheckFailed(str(entry["error"])[:_ERROR_CHARS])
    return entry.get("value")


def _out(answer: object) -> object:
    if not (isinstance(answer, dict) and "out" in answer):
        raise _malformed("a reset or step answer has no result")
    return answer["out"]


def _batch(answer: object, asked: int) -> Iterator[object]:
    """The steps of a ``steps`` answer, then the environment's error if it raised."""
    outs = _out(answer)
    assert isinstance(answer, dict)  # _out found it one
    failed = answer.get("error") is not None
    if not isinstance(outs, list) or len(outs) > asked or not (outs or failed):
        raise _malformed("a batch of steps is empty or longer than asked")
    yield from outs
    if failed:
        raise CheckFailed(str(answer["error"])[:_ERROR_CHARS])


class RemoteGymEnv:
    """Stands in for a hosted ``gymnasium.Env`` in :class:`GymChecks`."""

    def __init__(self, remote: Remote, spaces: dict[object, object]) -> None:
        self._remote, self._spaces = remote, spaces

    @property
    def action_space(self) -> object:
        return _entry(self._spaces.get("action"), 0)

    @property
    def observation_space(self) -> object:
        return _entry(self._spaces.get("observation"), 0)

    def reset(self, *, seed: int | None = None, options: object = _ABSENT) -> object:
        return _out(self._remote.call("reset", seed=seed, options=options is not _ABSENT))

    def step(self, action: object) -> object:
        return _out(self._remote.call("step", action=action))

    def batch(self, steps: int) -> int:
        return self._remote.batch(steps)

    def steps(self, actions: list[object]) -> Iterator[object]:
        """What each step returned, one step per action until the episode ended."""
        yield from _batch(self._remote.call("steps", action=actions), len(actions))


class RemoteParallelEnv:
    """Stands in for a hosted ``pettingzoo.ParallelEnv`` in :class:`ParallelChecks`;
    ``agents`` is what the host said after the last ``reset`` or ``step``."""

    def __init__(self, remote: Remote, spaces: dict[object, object]) -> None:
        self._remote, self._spaces = remote, spaces
        agents = spaces.get("agents")
        self.possible_agents: list[object] = agents if isinstance(agents, list) else []
        self.agents: list[object] = []

    def _index(self, agent: object) -> int:
        try:
            return self.possible_agents.index(agent)
        except ValueError:
            raise CheckFailed(f"agent {agent!r} is not one of possible_agents") from None

    def action_space(self, agent: object) -> object:
        return _entry(self._spaces.get("action"), self._index(agent))

    def observation_space(self, agent: object) -> object:
        return _entry(self._spaces.get("observation"), self._index(agent))

    def _after(self, answer: object) -> object:
        agents = answer.get("agents") if isinstance(answer, dict) else None
        if not isinstance(agents, list):
            raise _malformed("the environment's agents are not a list")
        self.agents = agents
        return _out(answer)

    def reset(self, *, seed: int | None = None, options: object = _ABSENT) -> object:
        return self._after(self._remote.call("reset", seed=seed,
                                             options=options is not _ABSENT))

    def step(self, actions: object) -> object:
        return self._after(self._remote.call("step", action=actions))

    def batch(self, steps: int) -> int:
        return self._remote.batch(steps)

    def steps(self, actions: list[dict[object, object]]) -> Iterator[object]:
        """Like :meth:`RemoteGymEnv.steps`, each action a dict over the possible agents
        (the host passes the current ones'); ``agents`` is updated after the batch."""
        answer = self._remote.call("steps", action=actions)
        self._after({**answer, "out": None} if isinstance(answer, dict) else None)
        yield from _batch(answer, len(actions))


@overload
def stand_in(remote: Remote, multi_agent: Literal[True]) -> RemoteParallelEnv: ...
@overload
def stand_in(remote: Remote, multi_agent: Literal[False]) -> RemoteGymEnv: ...
@overload
def stand_in(remote: Remote, multi_agent: bool) -> RemoteGymEnv | RemoteParallelEnv: ...
def stand_in(remote: Remote, multi_agent: bool) -> RemoteGymEnv | RemoteParallelEnv:
    """The checker's stand-in for the hosted environment, with its spaces rebuilt here."""
    spaces = remote.call("spaces")
    if not isinstance(spaces, dict):
        raise _malformed("the spaces are not a dict")
    return RemoteParallelEnv(remote, spaces) if multi_agent else RemoteGymEnv(remote, spaces)


class Checker:
    """Runs named checks in order; the first failure ends the run."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.current: str | None = None

    def run(self, name: str, fn: Callable[[], list[str] | None]) -> bool:
        self.current = name
        self.emit({"start": name})
        try:
            warnings = fn() or []
        except (HostGone, Stopped):
            raise  # the run is over; the caller names the check from the exit status
        except CheckFailed as exc:
            return self.fail(name, str(exc))
        except Exception as exc:  # noqa: BLE001 - odd (but well-formed) data in a check
            return self.fail(name, f"{type(exc).__name__}: {exc}")
        self.emit({"check": name, "success": True, "warnings": warnings, "error": None})
        return True

    def fail(self, name: str, error: str) -> bool:
        self.emit({"check": name, "success": False, "warnings": [],
                   "error": error[:_ERROR_CHARS]})
        return False


# ---- the checks ---------------------------------------------------------------------------


def _build(spec: CheckSpec, remote: Remote, checker: Checker) -> bool:
    """Have the host import the entrypoint and construct the environment."""
    entrypoint = str(spec["entrypoint"])

    def path_check() -> list[str]:
        module, sep, attr = entrypoint.rpartition(":")
        if not sep or not module or not attr:
            raise CheckFailed(f"'{entrypoint}' is not of the form module:Class")
        return []

    def import_check() -> list[str]:
        remote.call("load", source=str(spec["source"]), entrypoint=entrypoint,
                    multi_agent=bool(spec.get("multi_agent")))
        return []

    def construct() -> list[str]:
        spec["_rss_before"] = ProcessTree(remote.pid).sample()[1]
        remote.call("make", config=spec.get("config") or {})
        return []

    return all(checker.run(name, fn) for name, fn in (("Environment class path", path_check),
                                                      ("Class exists in path", import_check),
                                                      ("Preliminary environment", construct)))


def _kind_check(info: object, multi_agent: bool) -> list[str]:
    if not isinstance(info, dict):
        raise _malformed("the description is not a dict")
    name = str(info.get("class"))[:200]
    callable_space, agents = info.get("callable_action_space"), info.get("possible_agents")
    if multi_agent:
        if callable_space is True and agents is True:
            return []
        raise CheckFailed(f"{name} is not a PettingZoo ParallelEnv (it needs possible_agents"
                          " and action_space(agent)); upload it as single-agent if it is a"
                          " Gymnasium env")
    if callable_space is not False or agents is not False:
        raise CheckFailed(f"{name} looks like a PettingZoo env; upload it with --multi-agent")
    if info.get("reset_and_step") is not True:
        raise CheckFailed(f"{name} has no reset()/step(): not a Gymnasium Env")
    return []


def validate(spec: CheckSpec, remote: Remote, checker: Checker) -> Result | None:
    if not _build(spec, remote, checker):
        return None
    multi = bool(spec.get("multi_agent"))
    described: dict[str, object] = {}

    def kind() -> list[str]:
        described["info"] = remote.call("describe")
        return _kind_check(described["info"], multi)

    if not checker.run("Environment type", kind):
        return None
    holder: dict[str, GymChecks | ParallelChecks] = {}

    def action_space() -> list[str] | None:
        holder["checks"] = ParallelChecks(stand_in(remote, True)) if multi else GymChecks(
            stand_in(remote, False))
        return holder["checks"].action_space()

    if not checker.run("Action space", action_space):
        return None
    checks = holder["checks"]
    for name, fn in (("Observation space", checks.observation_space), ("Reset", checks.reset),
                     ("Reset seed", checks.reset_seed), ("Step", checks.step)):
        if not checker.run(name, fn):
            return None
    rollouts = int(spec.get("rollouts") or 0)
    if rollouts:
        name, count = "Random rollouts", rollouts
        limit = int(spec.get("max_episode_steps") or MAX_EPISODE_STEPS)
    else:  # a short smoke run: episodes may well last longer
        name, count, limit = "Episode lifecycle", 1, SMOKE_STEPS
    summary: Result = {}

    def lifecycle() -> list[str]:
        warnings, found = checks.episodes(count, limit)
        summary.update(found)
        return warnings if rollouts else []

    if not checker.run(name, lifecycle):
        return None
    info = described["info"]
    assert isinstance(info, dict)  # the kind check passed
    return {"env_class": str(info.get("class"))[:200], **summary}


# ---- the profile --------------------------------------------------------------------------


class ProcessTree:
    """CPU time and memory of a process and all its descendants, read from ``/proc`` by the
    checker (the host cannot misreport them); zeros where there is no ``/proc``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def pids(self) -> list[int]:
        found: list[int] = []
        pending = [self.pid]
        while pending and len(found) < 4096:
            pid = pending.pop()
            found.append(pid)
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for task in tasks:
                try:
                    with open(f"/proc/{pid}/task/{task}/children") as fh:
                        pending += [int(c) for c in fh.read().split()]
                except (OSError, ValueError):
                    continue
        return found

    def sample(self) -> tuple[float, int, int]:
        """(CPU seconds, resident bytes, peak resident bytes) summed over the tree."""
        cpu, rss, peak = 0.0, 0, 0
        tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{pid}/status") as fh:
                    status = dict(line.split(":", 1) for line in fh if ":" in line)
            except (OSError, IndexError, ValueError):
                continue  # it ended meanwhile
            cpu += (int(fields[11]) + int(fields[12])) / tick
            rss += int(fields[21]) * page
            peak += int(status.get("VmHWM", "0 kB").split()[0]) * 1024
        return cpu, rss, peak


def _action_pool(env: RemoteGymEnv | RemoteParallelEnv) -> list[object]:
    """Random actions the host takes in turn while profiled (per possible agent for
    PettingZoo), sampled here from the rebuilt spaces."""
    if isinstance(env, RemoteParallelEnv):
        for agent in env.possible_agents:
            checked_space(env.action_space(agent)).seed(0)
        return [{a: checked_space(env.action_space(a)).sample() for a in env.possible_agents}
                for _ in range(_POOL)]
    checked_space(env.action_space).seed(0)
    return [checked_space(env.action_space).sample() for _ in range(_POOL)]


def profile(spec: CheckSpec, remote: Remote, checker: Checker) -> Result | None:
    """Step one environment copy with random actions for ``seconds`` and measure it."""
    if not _build(spec, remote, checker):
        return None
    multi = bool(spec.get("multi_agent"))
    seconds = float(spec.get("seconds") or 2.0)
    tree = ProcessTree(remote.pid)
    metrics: Result = {}

    def measure() -> list[str]:
        env = stand_in(remote, multi)
        checks = ParallelChecks(env) if isinstance(env, RemoteParallelEnv) else GymChecks(env)
        checks.action_space()  # actions are sampled here, from spaces rebuilt here
        actions = _action_pool(env)
        env.reset(seed=0)
        steps, batch, peak = 0, 1, 0.0
        start_wall, (start_cpu, _, _) = time.perf_counter(), tree.sample()
        window_wall, window_cpu = start_wall, start_cpu
        while True:
            before = time.perf_counter()
            remote.call("run", action=actions, count=batch)
            steps += batch
            now = time.perf_counter()
            if now - before < _BATCH_S:  # fewer, longer requests: time the env, not the pipe
                batch = min(batch * 2, _MAX_BATCH)
            if now - window_wall >= 0.25:
                cpu = tree.sample()[0]
                peak = max(peak, (cpu - window_cpu) / (now - window_wall))
                window_wall, window_cpu = now, cpu
            if now - start_wall >= seconds:
                break
        wall = time.perf_counter() - start_wall
        cpu, rss, hwm = tree.sample()
        avg = (cpu - start_cpu) / wall
        # memory of one copy: what building and stepping it added to the host
        grown = max(rss - int(spec["_rss_before"]), 0)
        metrics.update(steps_per_second=round(steps / wall, 1), avg_cpu_per_env=round(avg, 3),
                       peak_cpu_per_env=round(max(peak, avg), 3),
                       memory_per_env_gb=round(grown / 2**30, 6),
                       peak_rss_gb=round(hwm / 2**30, 4), steps=steps)
        return []

    if not checker.run("Profile", measure):
        return None
    return metrics


def drive(spec: CheckSpec, remote: Remote, emit: Emit) -> None:
    """Run the checks (or the profile) ``spec`` asks for against the host behind ``remote``,
    reporting through ``emit``; returns without a result when the host went away."""
    checker = Checker(emit)
    try:
        if spec.get("mode") == "profile":
            result = profile(spec, remote, checker)
        else:
            result = validate(spec, remote, checker)
    except (HostGone, Stopped):
        return
    except Exception as exc:  # noqa: BLE001 - never leave the run without a verdict
        checker.fail(checker.current or "Environment class path",
                     f"the server's checker failed: {type(exc).__name__}: {exc}")
        return
    if result is not None:
        emit({"result": result})

