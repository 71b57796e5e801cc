"""Source files of uploaded environments used by the custom-environment tests."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
#: the walkthrough's environment (docs/arena-custom-env.md): walk right along a line.
LINE_WORLD = (EXAMPLES / "line_world" / "line_world.py").read_text()

_STEP_LINE = "        self.pos = max(0, min(self.size, self.pos + (1 if action == 1 else -1)))"


def _broken_step(body: str) -> str:
    """LineWorld whose ``step`` first runs ``body``."""
    return LINE_WORLD.replace(_STEP_LINE, f"{body}\n{_STEP_LINE}")


BROKEN = {
    # importing the module fails
    "import_error": "import numpy as np\nimport a_module_that_does_not_exist\n" + LINE_WORLD,
    # observations are 3 wide, the space says 1
    "wrong_spaces": LINE_WORLD.replace(
        "return np.array([self.pos / self.size], dtype=np.float32)",
        "return np.zeros(3, dtype=np.float32)"),
    # step() never returns
    "hanging_step": _broken_step("        import time\n        time.sleep(3600)"),
    # step() computes forever
    "busy_step": _broken_step("        while True:\n            pass"),
    # step() allocates without bound
    "unbounded_allocation": _broken_step(
        "        self.hog = [bytearray(64 << 20) for _ in range(10**6)]"),
}

#: two environment classes in one upload (the entrypoint must be chosen).
TWO_ENVS = LINE_WORLD + '''

class LongLineWorld(LineWorld):
    def __init__(self):
        super().__init__(size=20)
'''

#: a PettingZoo ParallelEnv with two agents.
PARALLEL = '''
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Pair(ParallelEnv):
    metadata = {"name": "pair_v0"}

    def __init__(self):
        self.possible_agents = ["a", "b"]
        self.agents = []
        self.t = 0

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return {a: np.zeros(2, dtype=np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        done = self.t >= 5
        obs = {a: np.full(2, self.t / 5, dtype=np.float32) for a in self.agents}
        rew = {a: float(actions[a]) for a in self.agents}
        term = {a: done for a in self.agents}
        trunc = {a: False for a in self.agents}
        infos = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rew, term, trunc, infos
'''


def tar_gz(files: dict[str, str | bytes]) -> bytes:
    """A .tar.gz holding ``files`` (path -> text or bytes)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def hostile_tar(kind: str) -> bytes:
    """A .tar.gz with one ordinary file and one member of the given hostile ``kind``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        ok = tarfile.TarInfo("line_world.py")
        ok.size = len(LINE_WORLD)
        tar.addfile(ok, io.BytesIO(LINE_WORLD.encode()))
        payload = b"owned\n"
        member = tarfile.TarInfo({"absolute": "/tmp/arena-escape.txt",
                                  "dotdot": "pkg/../../arena-escape.txt"}.get(kind, "evil"))
        if kind in ("absolute", "dotdot"):
            member.size = len(payload)
            tar.addfile(member, io.BytesIO(payload))
        elif kind == "symlink":
            member.type, member.linkname = tarfile.SYMTYPE, "/etc"
        elif kind == "hardlink":
            member.type, member.linkname = tarfile.LNKTYPE, "/etc/passwd"
        elif kind == "device":
            member.type, member.devmajor, member.devminor = tarfile.CHRTYPE, 1, 3
        elif kind == "fifo":
            member.type = tarfile.FIFOTYPE
        if kind not in ("absolute", "dotdot"):
            tar.addfile(member)
    return buf.getvalue()
