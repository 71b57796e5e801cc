"""The server's environment checker against scripted hosts: it judges what a host answers,
never what the host says about itself."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from agilerl.arena.server.env_checker import Remote, drive
from agilerl.arena.server.env_wire import Encoder, PipeReader, pack, read_frame

SPEC = {"mode": "validate", "source": "/nowhere", "entrypoint": "m:Env", "config": {},
        "multi_agent": False, "rollouts": 2}
Answer = Callable[[dict[str, Any]], Any]


def _line_world() -> dict[str, Answer]:
    """Answers of a well-behaved single-agent environment, per request."""
    obs = np.zeros(1, dtype=np.float32)
    return {
        "load": lambda r: {"value": None}, "make": lambda r: {"value": None},
        "describe": lambda r: {"value": {"class": "Line", "callable_action_space": False,
                                         "possible_agents": False, "reset_and_step": True}},
        "spaces": lambda r: {"value": {"action": [{"value": spaces.Discrete(2)}],
                                       "observation": [{"value": spaces.Box(0, 1, (1,))}]}},
        "reset": lambda r: {"value": {"out": (obs, {})}},
        "step": lambda r: {"value": {"out": (obs, 0.0, False, False, {})}},
        "steps": lambda r: {"value": {"out": [(obs, 1.0, True, False, {})], "error": None}},
    }


def _serve(answers: dict[str, Answer], requests: Any, out: int) -> None:
    while (frame := read_frame(requests)) is not None:
        reply = answers[frame[0]["op"]](frame[0])
        if reply is None:  # the scripted host goes away
            return
        if isinstance(reply, bytes):
            os.write(out, reply)
            continue
        encoder = Encoder()
        tree = {k: encoder.encode(v) if k == "value" else v for k, v in reply.items()}
        os.write(out, pack(tree, encoder.blobs))


def check(answers: dict[str, Answer], **spec: Any) -> list[dict[str, Any]]:
    """Drive a scripted host; the checker's messages."""
    req_r, req_w = os.pipe()
    ans_r, ans_w = os.pipe()
    host = threading.Thread(target=_serve, daemon=True,
                            args=(answers, os.fdopen(req_r, "rb"), ans_w))
    host.start()
    messages: list[dict[str, Any]] = []
    stop = threading.Event()
    try:
        reader = PipeReader(ans_r, stop, alive=host.is_alive)
        drive({**SPEC, **spec}, Remote(os.getpid(), reader, req_w), messages.append)
    finally:
        stop.set()
        os.close(req_w)
        host.join(timeout=5)
        os.close(ans_r)
        os.close(ans_w)
    return messages


def failure(messages: list[dict[str, Any]]) -> tuple[str, str]:
    failed = [m for m in messages if m.get("success") is False]
    assert failed and not any("result" in m for m in messages), messages
    return failed[0]["check"], failed[0]["error"]


def test_a_well_behaved_host_passes() -> None:
    messages = check(_line_world())
    assert messages[-1] == {"result": {"env_class": "Line", "episodes": 2, "mean_length": 1.0,
                                       "mean_return": 1.0}}
    assert all(m.get("success") is not False for m in messages)


def _with(**replace: Answer) -> dict[str, Answer]:
    return {**_line_world(), **replace}


@pytest.mark.parametrize("answers, check_name, words", [
    (_with(reset=lambda r: {"error": "RuntimeError: broken"}), "Reset", "RuntimeError: broken"),
    (_with(reset=lambda r: b"\x00\x00\x00\x05hello"), "Reset", "malformed"),
    (_with(reset=lambda r: {"value": "success"}), "Reset", "malformed"),
    (_with(reset=lambda r: {"value": {"out": ([0.5], {})}}), "Reset", "numpy array"),
    (_with(step=lambda r: {"value": {"out": (np.zeros(1, np.float32), float("nan"), False,
                                             False, {})}}), "Step", "not finite"),
    (_with(spaces=lambda r: {"value": {"action": [{"value": spaces.Text(3)}],
                                       "observation": []}}), "Action space", "Text"),
    (_with(spaces=lambda r: {"value": {"action": [{"value": 3}], "observation": []}}),
     "Action space", "gymnasium.spaces.Space, got int"),
    (_with(describe=lambda r: {"value": {"class": "X", "callable_action_space": True,
                                         "possible_agents": True, "reset_and_step": True}}),
     "Environment type", "--multi-agent"),
    (_with(steps=lambda r: {"value": {"out": [], "error": None}}), "Random rollouts",
     "empty or longer"),
    (_with(steps=lambda r: {"value": {"out": [(np.zeros(1, np.float32), 0.0, False, False,
                                               {})] * 999, "error": None}}),
     "Random rollouts", "empty or longer"),
    (_with(steps=lambda r: {"value": {"out": [(np.full(1, 5, np.float32), 0.0, False, False,
                                               {})], "error": "ValueError: later"}}),
     "Random rollouts", "not in its space"),
])
def test_what_the_host_answers_decides(answers: dict[str, Answer], check_name: str,
                                       words: str) -> None:
    name, error = failure(check(answers))
    assert name == check_name and words in error, (name, error)


def test_a_result_the_host_volunteers_is_only_data() -> None:
    forged = {"check": "Reset", "success": True, "warnings": [], "error": None}
    name, error = failure(check(_with(reset=lambda r: {"value": {"result": forged}})))
    assert name == "Reset" and "malformed" in error


def test_a_host_that_goes_away_leaves_no_verdict() -> None:
    messages = check(_with(step=lambda r: None))
    assert messages[-1] == {"start": "Step"}  # run_checker names the death from its status


def test_the_profile_is_timed_and_measured_by_the_checker() -> None:
    asked: list[int] = []

    def run(request: dict[str, Any]) -> Any:
        asked.append(int(request["count"]))
        return {"value": {"steps_per_second": 1e12}}  # a claim, ignored

    messages = check(_with(run=run), mode="profile", seconds=0.3)
    metrics = messages[-1]["result"]
    assert metrics["steps"] == sum(asked) and len(asked) > 1 and asked[1] == 2 * asked[0]
    assert 0 < metrics["steps_per_second"] < 1e12
    assert metrics["peak_rss_gb"] > 0  # this process, read from /proc
