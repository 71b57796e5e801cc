"""Issue 20 item 10: an uploaded environment cannot forge its own validation or profile.

Each environment below is uploaded to a real ``--allow-custom-code`` server and tries one
way of passing a check it fails (or of inflating its profile) from inside the process that
runs it: writing success messages to the result channel, patching the checker when its
module is imported, writing forged lines to every pipe it holds, then exiting 0. The
verdict must come from what the environment actually answers.
"""

from __future__ import annotations

from typing import Any

import pytest

from agilerl.arena.server.testing import RunningServer

from ..conftest import Api, ndjson
from ..envsources import LINE_WORLD
from ..test_custom_envs import ENVS, last, upload

_CHECKS = ["Environment class path", "Class exists in path", "Preliminary environment",
           "Environment type", "Action space", "Observation space", "Reset", "Reset seed",
           "Step", "Episode lifecycle"]

#: forged success for every check, then a result, as the checker's result lines.
_FORGED = f"""
import json as _json
_CHECKS = {_CHECKS!r}
_LINES = [_json.dumps({{"check": n, "success": True, "warnings": [], "error": None}})
          for n in _CHECKS]
_LINES.append(_json.dumps({{"result": {{"env_class": "LineWorld", "episodes": 1,
                                        "mean_length": 1.0, "mean_return": 1.0}}}}))
"""

#: the issue's case: reset() raises, after handing the checker object a forged verdict.
RESET_FORGES_THROUGH_THE_CHECKER = LINE_WORLD + _FORGED + '''

def _forge():
    import gc, os
    for obj in gc.get_objects():
        if type(obj).__name__ == "Checker" and hasattr(obj, "emit"):
            for line in _LINES:
                obj.emit(_json.loads(line))
            os._exit(0)


class Forger(LineWorld):
    def reset(self, *, seed=None, options=None):
        _forge()
        raise RuntimeError("reset is broken")
'''

#: patches the checker's module when the environment's module is imported, so that every
#: check "passes" whatever it finds; reset() raises.
PATCHES_THE_CHECKER = LINE_WORLD + '''

import sys as _sys

# the checker runs as ``python -m``: its module is __main__
_checker = _sys.modules.get("__main__")
if _checker is not None and hasattr(_checker, "Checker"):
    def _run(self, name, fn):
        self.emit({"start": name})
        try:
            fn()
        except BaseException:
            pass
        self.emit({"check": name, "success": True, "warnings": [], "error": None})
        return True
    _checker.Checker.run = _run


class Forger(LineWorld):
    def reset(self, *, seed=None, options=None):
        raise RuntimeError("reset is broken")
'''

#: knows nothing of the checker: writes forged lines to every pipe it holds, exits 0.
WRITES_TO_EVERY_PIPE = LINE_WORLD + _FORGED + '''

def _forge():
    import os, stat
    data = ("\\n".join(_LINES) + "\\n").encode()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, data)
        except OSError:
            pass
    os._exit(0)


class Forger(LineWorld):
    def reset(self, *, seed=None, options=None):
        _forge()
        raise RuntimeError("reset is broken")
'''

FORGED_SPEED = 123456789.0

#: a valid environment whose profile claims a speed it does not have.
FORGES_ITS_PROFILE = LINE_WORLD + f'''

import sys as _sys

# the checker runs as ``python -m``: its module is __main__
_checker = _sys.modules.get("__main__")
if _checker is not None and hasattr(_checker, "Checker"):
    _emit = _checker.Checker.emit

    def _lie(self, payload):
        if "result" in payload:
            payload = {{"result": {{**payload["result"], "steps_per_second": {FORGED_SPEED}}}}}
        _emit(self, payload)
    _checker.Checker.emit = _lie
'''


@pytest.fixture
def custom(make_server: Any) -> tuple[RunningServer, Api]:
    return make_server(allow_custom_code=True, env_profile_s=0.3,  # type: ignore[no-any-return]
                       env_check_wall_s=30.0)


def _refused_at_reset(api: Api, name: str, source: str) -> None:
    resp = upload(api, name, {"line_world.py": source}, entrypoint="line_world:Forger")
    failed = last(resp)
    assert failed["status"] == "failed" and failed["stage"] == "validation", failed
    assert failed["detail"]["check"] == "Reset", failed
    checks = {e["detail"]["check"]: e["detail"]["result"]["success"]
              for e in ndjson(resp.text) if e["kind"] == "check"}
    assert checks.get("Reset") is False and "Step" not in checks, checks
    listed = api.http.get(ENVS).json()["data"]
    assert listed[name]["v1"] == {"validated": False, "profiled": False}, listed


def test_a_reset_that_raises_cannot_hand_the_checker_a_forged_verdict(custom: Any) -> None:
    _, api = custom
    _refused_at_reset(api, "ForgeChecker", RESET_FORGES_THROUGH_THE_CHECKER)
    failed = last(api.http.post(ENVS + "/validate", json={"name": "ForgeChecker"},
                                timeout=120))
    assert failed["detail"]["check"] == "Reset"
    assert "reset is broken" in failed["detail"]["reason"], failed


def test_an_environment_that_patches_the_checker_is_still_checked(custom: Any) -> None:
    _, api = custom
    _refused_at_reset(api, "PatchChecker", PATCHES_THE_CHECKER)


def test_forged_lines_on_every_pipe_then_exit_0_fail_the_check(custom: Any) -> None:
    _, api = custom
    _refused_at_reset(api, "ForgePipes", WRITES_TO_EVERY_PIPE)


def test_the_profile_is_measured_not_reported(custom: Any) -> None:
    _, api = custom
    done = last(upload(api, "FastLiar", {"line_world.py": FORGES_ITS_PROFILE}))
    assert done["status"] == "completed", done
    profile = done["detail"]["profile"]
    assert profile["steps_per_second"] != FORGED_SPEED, profile
    assert 0 < profile["steps_per_second"] < 10_000_000, profile
    assert profile["peak_rss_gb"] > 0.001, profile  # a Python process is bigger than 1 MB


#: the host's encoder is patched to send its observation as a pickle whose loading runs
#: code (it writes the file named in the config): the checker must refuse it unread.
SENDS_A_PICKLE = LINE_WORLD + '''

import io as _io
import sys as _sys

import numpy as _np

_wire = _sys.modules.get("agilerl.arena.server.env_wire")


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('owned')",))


if _wire is not None:
    _encode = _wire.Encoder.encode

    def _evil(self, value, depth=0):
        if isinstance(value, _Payload):
            buf = _io.BytesIO()
            _np.save(buf, _np.array([value], dtype=object), allow_pickle=True)
            self.blobs.append(buf.getvalue())
            return {"$": "nd", "blob": len(self.blobs) - 1}
        return _encode(self, value, depth)
    _wire.Encoder.encode = _evil


class Forger(LineWorld):
    def __init__(self, marker="", **kwargs):
        super().__init__(**kwargs)
        self.marker = marker

    def reset(self, *, seed=None, options=None):
        return _Payload(self.marker), {}
'''


def test_a_pickle_from_the_environment_is_refused_unread(custom: Any, tmp_path: Any) -> None:
    _, api = custom
    marker = tmp_path / "owned-by-a-pickle"
    resp = upload(api, "Pickler", {"line_world.py": SENDS_A_PICKLE},
                  entrypoint="line_world:Forger", env_config=f"marker: {marker}\n")
    failed = last(resp)
    assert failed["status"] == "failed" and failed["detail"]["check"] == "Reset", failed
    assert "malformed data" in failed["detail"]["reason"], failed
    assert "without objects" in failed["detail"]["reason"], failed  # it reached the reader
    assert not marker.exists()


#: step() ends the process with status 0 and no word: the check it was in fails.
EXITS_0_IN_STEP = LINE_WORLD + '''

class Forger(LineWorld):
    def step(self, action):
        import os
        os._exit(0)
'''

#: step() closes every pipe it holds (the answers among them) and sleeps on.
CLOSES_ITS_PIPES = LINE_WORLD + '''

class Forger(LineWorld):
    def step(self, action):
        import os, stat, time
        for name in os.listdir("/proc/self/fd"):
            try:
                if stat.S_ISFIFO(os.fstat(int(name)).st_mode) and int(name) > 2:
                    os.close(int(name))
            except OSError:
                pass
        time.sleep(3600)
'''


@pytest.mark.parametrize("source, words", [
    (EXITS_0_IN_STEP, "exited with code 0"),
    (CLOSES_ITS_PIPES, "closed its pipe"),
])
def test_a_host_that_goes_away_fails_the_check_it_was_in(custom: Any, source: str,
                                                          words: str) -> None:
    _, api = custom
    resp = upload(api, "Quitter", {"line_world.py": source}, entrypoint="line_world:Forger")
    failed = last(resp)
    assert failed["status"] == "failed" and failed["detail"]["check"] == "Step", failed
    assert failed["detail"]["error_code"] == "VALIDATION_FAILED", failed
    assert words in failed["detail"]["reason"], failed
    shown = [e for e in ndjson(resp.text) if e["kind"] == "check" and e["message"] == "Step"]
    assert shown and shown[-1]["detail"]["result"]["success"] is False
