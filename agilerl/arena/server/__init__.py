"""Self-hosted Arena-compatible training server (``[server]`` extra).

Layout: :mod:`.config` (settings), :mod:`.store` (SQLite job store), :mod:`.auth`
(tokens, JWTs, device flow), :mod:`.policy` (what a manifest may ask for),
:mod:`.runs` (per-experiment folders), :mod:`.scheduler` (slots and subprocesses),
:mod:`.app` and the ``routes_*`` modules (HTTP), :mod:`.cli` (``arena-server``).
Uploaded environments: :mod:`.catalog` (records), :mod:`.env_archive` (safe unpacking),
:mod:`.env_install` (venvs), :mod:`.env_pipeline` (the streamed stages),
:mod:`.env_validation` and :mod:`.env_limits` (limited, sandboxed processes hosting an
upload, :mod:`.env_host`), :mod:`.env_checker` with :mod:`.env_api_checks` (the checks,
run in the server over the data-only pipe of :mod:`.env_wire`), :mod:`.env_jobs`
and :mod:`.dataset_jobs` (jobs on uploads).
Importing this package imports neither torch nor gymnasium.
"""

from __future__ import annotations

from agilerl.arena.server.config import ServerConfig

__all__ = ["ServerConfig"]
