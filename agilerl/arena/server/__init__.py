"""Self-hosted Arena-compatible training server (``[server]`` extra).

Layout: :mod:`.config` (settings), :mod:`.store` (SQLite job store), :mod:`.auth`
(tokens, JWTs, device flow), :mod:`.policy` (what a manifest may ask for),
:mod:`.runs` (per-experiment folders), :mod:`.scheduler` (slots and subprocesses),
:mod:`.app` and the ``routes_*`` modules (HTTP), :mod:`.cli` (``arena-server``).
Importing this package imports neither torch nor gymnasium.
"""

from __future__ import annotations

from agilerl.arena.server.config import ServerConfig

__all__ = ["ServerConfig"]
