"""Server settings: one dataclass, filled by the command line or by tests."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_RESOURCE_ID = "local-cpu"


def default_job_command() -> list[str]:
    """The training CLI every job runs (manifest path and flags are appended)."""
    return [sys.executable, "-m", "agilerl.train"]


@dataclass
class ServerConfig:
    """Everything the server needs to know; defaults are safe for a shared machine."""

    data_dir: Path
    slots: int = 1
    allow_custom_code: bool = False
    #: argv prefix of the worker; the server appends ``MANIFEST --checkpoint-path P ...``.
    job_command: list[str] = field(default_factory=default_job_command)
    #: seconds between SIGTERM and SIGKILL when a run is stopped.
    stop_grace_s: float = 10.0
    #: JSON / form request bodies (bytes).
    max_body_bytes: int = 1 << 20
    #: multipart uploads (bytes).
    max_upload_bytes: int = 16 << 20
    #: cap on the environment steps one job asks for, training and evaluation together
    #: (:class:`agilerl.arena.server.policy.Budget`).
    max_total_steps: int = 50_000_000
    #: cap on ``environment.num_envs`` (environment copies one job runs at once).
    max_envs: int = 256
    #: jobs a user may have waiting or running at once (QUEUED, STARTING, RUNNING, STOPPING).
    max_active_jobs_per_user: int = 20
    #: how many times a run interrupted by a server restart is re-queued before it fails.
    max_restarts: int = 2
    access_token_ttl_s: int = 900
    refresh_token_ttl_s: int = 30 * 24 * 3600
    device_code_ttl_s: int = 600
    device_poll_interval_s: int = 5
    #: device logins one client address may start: ``device_rate_burst`` at once, then
    #: ``device_rate_per_minute`` a minute (429 ``slow_down`` beyond).
    device_rate_per_minute: int = 10
    device_rate_burst: int = 10
    #: unexpired, unused device codes kept at once, whoever asked (429 beyond).
    max_pending_device_codes: int = 1000
    #: checkpoint every ``max_steps // checkpoint_fraction`` steps unless the manifest says.
    checkpoint_fraction: int = 10
    #: where devices are told to approve; filled in from the bound address when empty.
    public_url: str = ""
    realm: str = "arena"
    #: variables set for every job on top of the allow-listed ones (``--job-env``).
    extra_env: dict[str, str] = field(default_factory=dict)
    #: confine jobs with Landlock where the kernel has it (:mod:`.sandbox`).
    job_sandbox: bool = True
    #: memory all of one job's processes may use together (bytes; None: no cap), and how
    #: many processes it may run at once (:mod:`.containment`).
    job_memory_bytes: int | None = None
    job_max_processes: int = 1024
    #: size of the private ``/dev/shm`` of each job or check (where namespaces allow).
    shm_bytes: int = 512 << 20
    # ---- what one job may hold, and one user's disk (:mod:`.policy`, :mod:`.quota`) ---
    #: checkpoints one job may save (``training.checkpoint_steps`` at least
    #: ``max_steps / max_checkpoints_per_job``); their size is the disk quota's concern.
    max_checkpoints_per_job: int = 100
    #: cap on repetition counts the step budget does not see (``algorithm.update_epochs``,
    #: ``training.num_epochs``).
    max_epochs: int = 100
    #: widest layer, most layers, and most hidden weights of a job's whole population
    #: (at the size mutation may grow the networks to; :mod:`.network_budget`).
    max_network_width: int = 4096
    max_network_depth: int = 64
    max_network_params: int = 100_000_000
    #: bytes one user's experiments, uploaded environments (venvs and scratch included)
    #: and datasets may take on disk together; 0: no quota.
    user_disk_quota_bytes: int = 20 << 30
    #: seconds between two measurements of a running job's user's disk use.
    quota_check_interval_s: float = 10.0
    # ---- uploaded environments (only with allow_custom_code) ------------------------
    #: seconds pip may take to install an environment's requirements.
    env_install_timeout_s: float = 600.0
    #: largest an environment's virtual environment may grow (bytes).
    env_max_venv_bytes: int = 2 << 30
    #: largest an uploaded archive may unpack to (bytes), and its most members.
    env_max_source_bytes: int = 64 << 20
    env_max_source_files: int = 2000
    #: limits of one validation or profiling process: CPU seconds, address space, wall.
    env_check_cpu_s: int = 120
    env_check_memory_bytes: int = 4 << 30
    env_check_wall_s: float = 180.0
    #: random episodes run by ``do_rollouts`` (each cut at 1,000 steps).
    env_rollout_episodes: int = 20
    #: seconds an environment is stepped when profiled.
    env_profile_s: float = 2.0
    #: validations and profiles run at once (others wait their turn).
    env_concurrent_checks: int = 2
    #: run each job's population on this Ray cluster (``--ray-address``; :mod:`.cluster`),
    #: honouring its ``num_nodes``; None: jobs run in this machine's slots.
    ray_address: str | None = None

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).expanduser().resolve()
        if self.slots < 1:
            raise ValueError("slots must be at least 1")

    @property
    def db_path(self) -> Path:
        return self.data_dir / "arena.sqlite3"

    @property
    def secret_path(self) -> Path:
        return self.data_dir / "jwt_secret"

    @property
    def experiments_dir(self) -> Path:
        return self.data_dir / "experiments"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / "server.lock"

    def ensure_dirs(self) -> None:
        """Create the data folder readable by its owner only."""
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.data_dir, 0o700)
        self.experiments_dir.mkdir(mode=0o700, exist_ok=True)
