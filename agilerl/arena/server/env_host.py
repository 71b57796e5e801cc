"""Host an uploaded environment for the checker: answer requests, judge nothing.

    python -m agilerl.arena.server.env_host

Runs in the environment's own virtual environment, in the limited, sandboxed process
:mod:`.env_validation` starts. It reads requests from stdin and writes answers to stdout,
as frames of :mod:`.env_wire` (JSON and numpy arrays, never pickle):

* ``load`` (source folder, entrypoint): import the class as the trainer does
  (:func:`agilerl.envs.entrypoint.resolve_entrypoint` with the source folder as ``path``);
* ``make`` (config): construct the environment;
* ``describe``: its class name and which of the API's attributes it has;
* ``spaces``: its action and observation spaces (per agent for PettingZoo);
* ``reset`` (seed, whether to pass ``options=None``) and ``step`` (action): what the environment returned, and its
  ``agents`` after the call for PettingZoo;
* ``steps`` (actions): a batch of steps of one episode, for the random rollouts;
* ``run`` (actions, count): step that often, for the profile, and answer nothing;
* ``close``: close it and exit.

An answer is ``{"value": ...}`` or ``{"error": TEXT}`` when the environment raised. What
the host says is only ever data for :mod:`.env_checker`, which decides every check from the
values themselves; the environment's own prints go to stderr, and whatever the upload does
to this process (patch it, write to its pipes, exit) can at most fail a check.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from agilerl.arena.server.env_wire import Decoder, Encoder, WireError, pack, read_frame


def _load_resolver() -> Callable[[str, str], Callable[..., object]]:
    """``resolve_entrypoint`` without importing :mod:`agilerl.envs` (which loads every vector
    env and, through them, far more than a check needs under a memory limit)."""
    import agilerl

    file = Path(agilerl.__file__).parent / "envs" / "entrypoint.py"
    spec = importlib.util.spec_from_file_location("_agilerl_entrypoint", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.resolve_entrypoint  # type: ignore[no-any-return]


def short_error(exc: BaseException) -> str:
    """``Type: message (at file.py:LINE)``, the line being the upload's own last frame."""
    if isinstance(exc, MemoryError):
        return "MemoryError: the environment ran out of memory (the server's memory limit)"
    text = f"{type(exc).__name__}: {exc}".strip()
    ours = str(Path(__file__).resolve().parents[2])  # the agilerl package
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not f.filename.startswith(("<", ours))]
    if user:
        last = user[-1]
        text += f" (at {Path(last.filename).name}:{last.lineno})"
    return text[:2000]


def _spaces(env: Any, multi_agent: bool) -> dict[str, object]:
    """Each space, or the error raised fetching it (the checker fails the right check)."""

    def fetch(get: Callable[[], object]) -> dict[str, object]:
        try:
            return {"value": get()}
        except Exception as exc:  # noqa: BLE001 - the environment may raise anything
            return {"error": short_error(exc)}

    if not multi_agent:
        return {"action": [fetch(lambda: getattr(env, "action_space", None))],
                "observation": [fetch(lambda: getattr(env, "observation_space", None))]}
    agents = list(getattr(env, "possible_agents", None) or [])
    return {"agents": agents,
            "action": [fetch(functools.partial(env.action_space, a)) for a in agents],
            "observation": [fetch(functools.partial(env.observation_space, a))
                            for a in agents]}


def _episode_over(out: object, env: Any, multi_agent: bool) -> bool:
    """Whether a step ended the episode (a malformed answer ends the batch too: the
    checker will say what is wrong with it)."""
    if multi_agent:
        return not env.agents
    try:
        return not (isinstance(out, tuple) and len(out) == 5) or bool(out[2] or out[3])
    except Exception:  # noqa: BLE001 - an array flag has no truth value
        return True


class Host:
    """The environment and the requests on it."""

    def __init__(self) -> None:
        self.factory: Callable[..., object] | None = None
        #: the upload's environment: whatever its class is, used by duck typing (what it
        #: lacks or does wrong is answered as its error).
        self.env: Any = None
        self.multi_agent = False

    def load(self, request: Mapping[str, object]) -> None:
        self.factory = _load_resolver()(str(request["entrypoint"]), str(request["source"]))
        self.multi_agent = bool(request.get("multi_agent"))
        return None

    def make(self, request: Mapping[str, object]) -> None:
        config = request.get("config") or {}
        # the checker loads first, and the config is the upload's checked mapping
        assert self.factory is not None and isinstance(config, dict)
        self.env = self.factory(**config)
        return None

    def describe(self, _: Mapping[str, object]) -> dict[str, object]:
        env = self.env
        return {"class": type(env).__name__,
                "callable_action_space": callable(getattr(env, "action_space", None)),
                "possible_agents": hasattr(env, "possible_agents"),
                "reset_and_step": hasattr(env, "reset") and hasattr(env, "step")}

    def spaces(self, _: Mapping[str, object]) -> dict[str, object]:
        return _spaces(self.env, self.multi_agent)

    def _after(self, out: object) -> dict[str, object]:
        return {"out": out, "agents": list(self.env.agents)} if self.multi_agent else {"out": out}

    def reset(self, request: Mapping[str, object]) -> dict[str, object]:
        seed = request.get("seed")
        kwargs: dict[str, int | None] = {"seed": seed if isinstance(seed, int) else None}
        if request.get("options"):  # the checker asked for reset(seed=..., options=None)
            kwargs["options"] = None
        return self._after(self.env.reset(**kwargs))

    def step(self, request: Mapping[str, object], blobs: list[bytes]) -> dict[str, object]:
        return self._after(self.env.step(Decoder(blobs).decode(request.get("action"))))

    def steps(self, request: Mapping[str, object], blobs: list[bytes]) -> dict[str, object]:
        """One step per action (PettingZoo: each a dict over possible agents, of which the
        current ones are passed) until the episode ends; an exception ends the batch and
        is answered after the steps before it, which the checker judges first."""
        env, outs, error = self.env, [], None
        actions = Decoder(blobs).decode(request.get("action"))
        assert isinstance(actions, list)  # the checker sends a list of actions
        for action in actions:
            try:
                if self.multi_agent:
                    assert isinstance(action, dict)  # one per possible agent
                    outs.append(env.step({a: action[a] for a in env.agents if a in action}))
                else:
                    outs.append(env.step(action))
                if _episode_over(outs[-1], env, self.multi_agent):
                    break
            except BaseException as exc:  # noqa: BLE001 - the environment may raise anything
                error = short_error(exc)
                break
        answer = self._after(None)
        return {**answer, "out": outs, "error": error}

    def run(self, request: Mapping[str, object], blobs: list[bytes]) -> None:
        """``count`` steps with the checker's actions, taken in turn (the profile, which
        would otherwise time the pipe rather than the environment); an episode that ends
        is reset."""
        actions = Decoder(blobs).decode(request.get("action"))
        count = request.get("count") or 0
        # the checker sends a list of actions (dicts for PettingZoo) and an int
        assert isinstance(actions, list) and isinstance(count, int)
        env = self.env
        for i in range(int(count)):
            action = actions[i % len(actions)]
            if self.multi_agent:
                assert isinstance(action, dict)
                if not env.agents:
                    env.reset()
                env.step({a: action[a] for a in env.agents})
            else:
                _, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    env.reset()
        return None


def _answer(host: Host, request: Mapping[str, object], blobs: list[bytes]) -> dict[str, object]:
    op = request.get("op")
    handlers = {"load": host.load, "make": host.make, "describe": host.describe,
                "spaces": host.spaces, "reset": host.reset}
    takes_data = {"step": host.step, "steps": host.steps, "run": host.run}
    if op in takes_data:
        return {"value": takes_data[str(op)](request, blobs)}
    if op not in handlers:
        return {"error": f"unknown request {str(op)[:40]!r}"}
    return {"value": handlers[str(op)](request)}


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    host = Host()
    while (frame := read_frame(requests)) is not None:
        request, blobs = frame
        if request.get("op") == "close":
            break
        try:
            answer = _answer(host, request, blobs)
        except (WireError, KeyError) as exc:
            answer = {"error": f"malformed request: {exc}"}
        except BaseException as exc:  # noqa: BLE001 - the environment may raise anything
            answer = {"error": short_error(exc)}
        encoder = Encoder()
        try:
            tree = {"value": encoder.encode(answer["value"])} if "value" in answer else answer
            data = pack(tree, encoder.blobs)
        except Exception as exc:  # noqa: BLE001 - a value that cannot be sent as data
            data = pack({"error": f"the answer cannot be sent as data: {short_error(exc)}"})
        answers.write(data)
        answers.flush()
    with contextlib.suppress(Exception):  # nothing depends on a clean close
        host.env.close()


def main() -> int:
    # The pipes to the checker become private descriptors; fd 0 reads nothing and fd 1 is
    # stderr, so what the environment reads or prints never mixes with the answers.
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr
    serve(requests, answers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
