"""The Arena client stays light: no torch, no gymnasium, fast to start."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import agilerl.arena
from agilerl.arena import ArenaClient, ArenaTrainer, ArenaError
import agilerl.arena.cli, agilerl.arena.commands, agilerl.arena.trainer
client = ArenaClient(api_key="k", base_url="https://arena.example")
trainer = ArenaTrainer("DQN", "CartPole-v1", {"max_steps": 100}, client=client)
assert trainer.to_manifest()["algorithm"]["name"] == "DQN"
heavy = sorted(m for m in ("torch", "gymnasium", "pettingzoo", "numpy") if m in sys.modules)
print(",".join(heavy) or "clean")
"""


def test_arena_package_imports_no_torch_and_no_gymnasium() -> None:
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "clean"


def test_cli_help_is_fast_and_clean() -> None:
    code = (
        "import sys, time; t = time.perf_counter()\n"
        "from agilerl.arena.cli import build_parser\n"
        "build_parser().format_help()\n"
        "print('torch' in sys.modules, 'httpx' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]  # the parser alone loads no HTTP stack
