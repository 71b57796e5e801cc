"""Runs queued experiments as subprocesses in a fixed number of slots.

Each run is ``<job_command> manifest.json --checkpoint-path <exp>/checkpoints
--checkpoint-steps N --run-dir <exp>/run [--resume-from-checkpoint <latest>]`` started in
its own session (process group) with the experiment folder as working directory and
``HOME``, an allow-listed environment (:func:`job_env`), under the process-tree
supervisor of :mod:`agilerl.arena.server.containment` (its own PID namespace where the
kernel allows, a tree-wide memory cap) and, where the kernel has Landlock, through
:mod:`agilerl.arena.server.sandbox` so it cannot reach the rest of the data folder. The
trainer's progress display is left on: writing to a pipe it prints plain lines, which
become the job's log. Two reader threads copy stdout/stderr line by line into
``logs.ndjson``; a waiter thread records the outcome. Stopping sends SIGTERM to the
trainer (its own vector-env workers are left to it), then ends the whole tree after the
grace period; when the trainer exits, everything it started is killed with it (whatever
its session) and the slot is freed.

Restart rule (applied by :meth:`Scheduler.recover` before the first job starts): a run
that was STARTING or RUNNING when the previous server process ended is recorded as FAILED
("interrupted by server restart"), its leftover processes are killed, and it is re-queued
at its original place in the queue (attempt + 1, resuming from its latest checkpoint,
from scratch without one) as long as it has been re-queued this way fewer than
``max_restarts`` times; a run that was STOPPING
becomes STOPPED; a PENDING submission whose files were written becomes QUEUED, otherwise
FAILED. QUEUED jobs simply stay queued.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypedDict

import agilerl
from agilerl.arena.server import states
from agilerl.arena.server.citation import manifest_citer
from agilerl.arena.server.cluster import ClusterUnavailable, RayCluster
from agilerl.arena.server.config import ServerConfig
from agilerl.arena.server.containment import for_jobs
from agilerl.arena.server.env_jobs import Binding, binding_json, binding_of
from agilerl.arena.server.passed_env import passed_env
from agilerl.arena.server.quota import QuotaWatch
from agilerl.arena.server.runs import LogWriter, RunDir
from agilerl.arena.server.sandbox import landlock_abi
from agilerl.arena.server.store import Row, Store

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject

log = logging.getLogger(__name__)


class _Steps(TypedDict, total=False):
    """The steps a finished job got to, recorded with its last transition when known."""

    steps: int


_TICK_S = 0.5
#: how long the log readers may take to drain once the job's tree has been ended.
_DRAIN_S = 5.0


def job_env(run: RunDir, extra: dict[str, str]) -> dict[str, str]:
    """A job's whole environment: the allow-listed server variables, ``HOME`` and
    ``TMPDIR`` inside its experiment folder, what Python needs to find agilerl, then the
    operator's ``extra`` (``--job-env``)."""
    env = passed_env()
    root = str(Path(agilerl.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env.update(HOME=str(run.root), TMPDIR=str(run.tmp), PYTHONPATH=path, PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


@dataclass
class _Job:
    exp_id: int
    proc: subprocess.Popen[str]
    writer: LogWriter
    started: threading.Event = field(default_factory=threading.Event)
    killer: threading.Timer | None = None
    #: the Ray placement group reserved for the job (``--ray-address`` servers)
    reservation: str | None = None
    #: rewrites a log line to cite the user's manifest file (:mod:`.citation`)
    cite: Callable[[str], str] = str


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_leader(proc: subprocess.Popen[str], sig: int) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class Scheduler:
    """Slot-limited job runner; all state changes go through the store."""

    def __init__(self, store: Store, config: ServerConfig) -> None:
        self.store = store
        self.config = config
        self._jobs: dict[int, _Job] = {}
        #: waiter threads still recording an outcome; joined on shutdown before the store closes
        self._waiters: set[threading.Thread] = set()
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        #: Landlock ABI the jobs are confined with; 0: unconfined (no Landlock, or disabled).
        self.sandbox_abi = landlock_abi() if config.job_sandbox else 0
        #: how job process trees are contained and their memory capped (:mod:`.containment`)
        self.tree = for_jobs(on_ray_cluster=config.ray_address is not None)
        #: the Ray cluster jobs run on (``--ray-address``), else None: jobs run here.
        self.cluster = RayCluster(config.ray_address) if config.ray_address else None
        #: stops running jobs whose users go over their disk quota (:mod:`.quota`).
        self.quota = QuotaWatch(config)

    def run_dir(self, exp_id: int) -> RunDir:
        # the trainer counts steps for the whole population, users see them per agent
        row = self.store.experiment(exp_id)
        agents = max(1, int(row["pop_size"])) if row is not None else 1
        return RunDir(self.config.experiments_dir / str(exp_id), agents)

    def manifest_of(self, row: Row) -> JsonObject:
        """The server's copy of an experiment's manifest (``experiments.manifest``), from
        which each launch rewrites the job's ``manifest.json``.

        A row recorded before the database kept it imports the job's copy once.
        """
        if row.get("manifest") is not None:
            data = json.loads(row["manifest"])
        else:
            folder = RunDir(self.config.experiments_dir / str(row["id"]))
            try:
                data = folder.read_manifest()
            except (OSError, ValueError):
                return {}
            self.store.update(int(row["id"]), manifest=json.dumps(data))
            row["manifest"] = json.dumps(data)
        return data if isinstance(data, dict) else {}

    # ---- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self._loop, name="arena-scheduler", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def shutdown(self) -> None:
        """Stop scheduling and end every run; their states are left for :meth:`recover`."""
        self._closing.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            _signal_leader(job.proc, signal.SIGTERM)
        for job in jobs:
            try:
                job.proc.wait(timeout=min(self.config.stop_grace_s, 5.0))
            except subprocess.TimeoutExpired:
                self.tree.end(job.proc.pid)
                job.proc.wait(timeout=5)
        with self._lock:
            waiters = list(self._waiters)
        for thread in waiters:
            thread.join(timeout=10)

    def recover(self) -> None:
        """Apply the restart rule (module docstring) to rows left by a previous process."""
        for row in self.store.in_states({states.PENDING}):
            if self.run_dir(row["id"]).manifest.exists():
                self.store.transition(row["id"], states.QUEUED, reason="submission recovered",
                                      queued_at=row["created_at"])
            else:
                self.store.transition(row["id"], states.FAILED, reason="submission interrupted",
                                      error="Submission interrupted by a server restart")
        for row in self.store.in_states(states.LIVE):
            if row["pid"]:
                self._kill_orphan(int(row["pid"]), self.run_dir(row["id"]).root)
            if row["state"] == states.STOPPING:
                self.store.transition(row["id"], states.STOPPED, reason="server restart")
                continue
            self.store.transition(row["id"], states.FAILED, reason="server restart",
                                  error="Interrupted by a server restart")
            if row["restarts"] < self.config.max_restarts:
                self.store.transition(
                    row["id"], states.QUEUED, reason="re-queued after server restart",
                    attempt=row["attempt"] + 1, restarts=row["restarts"] + 1, error=None,
                    queued_at=row["queued_at"],  # keep its place ahead of later submissions
                )

    def _kill_orphan(self, pid: int, root: Path) -> None:
        """End a worker left by a dead server, only if it is still that experiment's run."""
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return
        if Path(cwd) != root or not _group_alive(pid):
            return
        _signal_group(pid, signal.SIGTERM)
        for _ in range(int(self.config.stop_grace_s * 10) + 1):
            if not _group_alive(pid):
                break
            self._closing.wait(0.1)
        if _group_alive(pid):
            self.tree.end(pid)

    # ---- scheduling -------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._closing.is_set():
            try:
                self._fill_slots()
                self.quota.tick(self)
            except Exception:  # keep scheduling whatever one launch did
                log.exception("scheduler iteration failed")
            self._wake.wait(_TICK_S)
            self._wake.clear()

    def _fill_slots(self) -> None:
        with self._lock:
            free = self.config.slots - len(self._jobs)
        if free <= 0:
            return
        for row in self.store.queued(free):
            if self._closing.is_set():
                return
            self._launch(row)

    def _command(self, row: Row, run: RunDir) -> list[str]:
        # Built from the server's copies only: the job may have rewritten any file of its
        # folder (manifest.json included) to widen its next launch.
        manifest = self.manifest_of(row)
        training = manifest.setdefault("training", {})
        assert isinstance(training, dict)  # a section of the server's validated copy
        training["max_steps"] = int(row["max_steps"])
        run.write_manifest(manifest)
        every = training.get("checkpoint_steps") or max(
            1, int(row["max_steps"]) // self.config.checkpoint_fraction)
        assert isinstance(every, int | float | str)  # a number there
        job_command, readable = custom_env_command(self._binding(row), self.config.job_command)
        program = job_command[0]
        contain = self.tree.prefix(memory_bytes=self.config.job_memory_bytes,
                                   max_processes=self.config.job_max_processes,
                                   shm_bytes=self.config.shm_bytes)
        if (self.sandbox_abi or contain) and shutil.which(
                program, path=os.environ.get("PATH")) is None:
            # the wrapper would start and then fail to exec it: say so as Popen would
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        confine = [sys.executable, "-m", "agilerl.arena.server.sandbox",
                   "--hide", str(self.config.data_dir), *self.tree.hide_args(),
                   "--write", str(run.root), *readable, *self._ray_writes(), "--"]
        cmd = [*contain, *(confine if self.sandbox_abi else []), *job_command,
               str(run.manifest),
               "--checkpoint-path", str(run.checkpoints),
               "--checkpoint-steps", str(int(every)), "--run-dir", str(run.run)]
        if self.config.ray_address:
            cmd += ["--backend", "ray", "--ray-address", self.config.ray_address]
        latest = run.latest_checkpoint() if row["attempt"] > 1 else None
        if latest is not None:
            cmd += ["--resume-from-checkpoint", str(latest.path)]
            # the resumed trainer appends from the checkpoint's step on
            run.trim_metrics(latest.total_steps)
        return cmd

    def _binding(self, row: Row) -> Binding | None:
        """The uploaded environment the run uses (:func:`.env_jobs.binding_of`); a row
        older than ``experiments.custom_env`` has it recorded there on first launch."""
        binding = binding_of(row, self.config.data_dir)
        if row.get("custom_env") is None:
            self.store.update(int(row["id"]), custom_env=binding_json(binding))
        return binding

    def _ray_writes(self) -> list[str]:
        """A sandboxed job's Ray driver writes its logs in the cluster's temp folder."""
        session = self.cluster.session_dir() if self.cluster is not None else None
        return ["--write", str(session.parent)] if session is not None else []

    def _launch(self, row: Row) -> None:
        exp_id = int(row["id"])
        run = self.run_dir(exp_id)
        with self._lock:
            if self.store.transition(exp_id, states.STARTING, reason="slot assigned") is None:
                return  # stopped while waiting
            writer: LogWriter | None = None
            reservation: str | None = None
            try:
                writer = LogWriter(run.logs)
                reservation, extra = self._reserve(row)
                cmd = self._command(row, run)
                run.tmp.mkdir(exist_ok=True)
                proc = subprocess.Popen(
                    cmd, cwd=run.root, env=job_env(run, {**extra, **self.config.extra_env}),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    errors="replace", bufsize=1, start_new_session=True,
                )
            except (OSError, ValueError, ClusterUnavailable) as exc:  # e.g. unreadable folder
                if reservation is not None and self.cluster is not None:
                    self.cluster.release(reservation)
                if writer is not None:
                    writer.write("stderr", f"could not start the training process: {exc}")
                    writer.close()
                self.store.transition(exp_id, states.FAILED, reason="launch failed",
                                      error=f"Could not start the training process: {exc}")
                return
            job = _Job(exp_id, proc, writer, reservation=reservation,
                       cite=manifest_citer(run.manifest, row.get("manifest_file")))
            self._jobs[exp_id] = job
            self.store.update(exp_id, pid=proc.pid)
        readers = [
            threading.Thread(target=self._read, args=(job, proc.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._read, args=(job, proc.stderr, "stderr"), daemon=True),
        ]
        for t in readers:
            t.start()
        waiter = threading.Thread(target=self._wait, args=(job, readers), daemon=True,
                                  name=f"arena-job-{exp_id}")
        with self._lock:
            self._waiters.add(waiter)
        waiter.start()

    def _reserve(self, row: Row) -> tuple[str | None, dict[str, str]]:
        """On a Ray cluster: the job's ``num_nodes`` nodes, reserved under a name its
        driver finds through the environment."""
        if self.cluster is None:
            return None, {}
        name = f"arena-job-{int(row['id'])}-attempt-{int(row['attempt'])}"
        return name, self.cluster.reserve(name, int(row["num_nodes"] or 1))

    def _read(self, job: _Job, pipe: IO[str] | None, stream: str) -> None:
        if pipe is None:
            return
        try:
            for line in pipe:
                job.writer.write(stream, job.cite(line.rstrip("\r\n")))
                if not job.started.is_set():
                    job.started.set()
                    self.store.transition(job.exp_id, states.RUNNING, reason="first output",
                                          only_from=(states.STARTING,))
        except ValueError:  # the log was closed: the job ended and its drain time is over
            pass
        pipe.close()

    def _wait(self, job: _Job, readers: list[threading.Thread]) -> None:
        code = job.proc.wait()
        if _group_alive(job.proc.pid):  # helpers the trainer left behind
            _signal_group(job.proc.pid, signal.SIGKILL)
        self.tree.clean(job.proc.pid)
        # The supervisor has ended the tree, so the pipes close; should anything still hold
        # them (an uncontained server), the slot is freed anyway once the drain time is over.
        for t in readers:
            t.join(timeout=_DRAIN_S)
        job.writer.close()
        if job.killer is not None:
            job.killer.cancel()
        if job.reservation is not None and self.cluster is not None:
            self.cluster.release(job.reservation)
        with self._lock:
            self._jobs.pop(job.exp_id, None)
        try:
            if not self._closing.is_set():
                self._record_exit(job.exp_id, code)
        finally:
            with self._lock:
                self._waiters.discard(threading.current_thread())
            self._wake.set()

    def _record_exit(self, exp_id: int, code: int) -> None:
        run = self.run_dir(exp_id)
        steps = self.live_steps(exp_id)
        extra: _Steps = {"steps": steps} if steps is not None else {}
        if code == 0:
            done = self.store.transition(exp_id, states.COMPLETED, reason="exit 0",
                                         only_from=(states.STARTING, states.RUNNING), **extra)
        else:
            err = f"Training process exited with code {code}"
            tail = _last_stderr(run)
            if tail:
                err += f": {tail}"
            done = self.store.transition(exp_id, states.FAILED, reason=f"exit {code}",
                                         only_from=(states.STARTING, states.RUNNING),
                                         error=err, **extra)
        if done is None:  # a stop was in progress
            self.store.transition(exp_id, states.STOPPED, reason="process ended", **extra)

    def live_steps(self, exp_id: int) -> int | None:
        """Steps per agent so far (the unit of ``max_steps``), from the run's files."""
        run = self.run_dir(exp_id)
        found = [s for s in (run.last_metric_step(),) if s is not None]
        latest = run.latest_checkpoint()
        if latest is not None:
            found.append(latest.total_steps)
        return max(found) // run.agents if found else None

    # ---- stopping ---------------------------------------------------------------------

    def signal_stop(self, exp_id: int) -> None:
        """SIGTERM the run now, SIGKILL it after the grace period if it is still there."""
        with self._lock:
            job = self._jobs.get(exp_id)
        if job is None:
            # No process: the row moved to STOPPING between launch steps or after a restart.
            self.store.transition(exp_id, states.STOPPED, reason="no process to stop",
                                  only_from=(states.STOPPING,))
            return
        _signal_leader(job.proc, signal.SIGTERM)
        job.killer = threading.Timer(self.config.stop_grace_s, self._kill, args=(job,))
        job.killer.daemon = True
        job.killer.start()

    def _kill(self, job: _Job) -> None:
        if job.proc.poll() is None or _group_alive(job.proc.pid):
            self.tree.end(job.proc.pid)

    def running(self) -> list[int]:
        with self._lock:
            return list(self._jobs)


def custom_env_command(binding: Binding | None,
                       job_command: list[str]) -> tuple[list[str], list[str]]:
    """The job command and the sandbox's ``--read`` arguments for a run on ``binding``:
    an uploaded environment's runs use its interpreter and may read its source and venv
    (:mod:`.env_jobs`)."""
    if binding is None:
        return list(job_command), []
    return binding.command(job_command), [a for p in binding.readable() for a in ("--read", p)]


def _last_stderr(run: RunDir) -> str:
    entries, _ = run.read_logs(max(0, run.log_size() - 8192))
    for entry in reversed(entries):
        if entry.get("stream") == "stderr" and str(entry.get("message", "")).strip():
            return str(entry["message"]).strip()[:300]
    return ""
