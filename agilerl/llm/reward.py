"""The user's reward function: loaded from ``reward_file_path`` / ``reward_fn_name``.

The file is user code and runs in this process (the Arena server refuses it unless started
with ``--allow-custom-code``). The function is called once per completion. Its arguments
are matched by name: ``completion`` (or ``completions``, ``response``), ``answer`` (or
``solution``, ``target``) and ``question`` (or ``prompt``); a function whose parameters
have other names gets them positionally in the order ``(completion, answer, question)``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agilerl.llm.errors import RewardFunctionError

_ROLES = {
    "completion": ("completion", "completions", "response", "output", "text"),
    "answer": ("answer", "solution", "target", "ground_truth", "reference"),
    "question": ("question", "prompt", "problem", "query"),
}


def load_reward_function(path: str | Path, name: str) -> Callable[..., Any]:
    """Import ``name`` from the Python file ``path`` (both named in errors by their field)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise RewardFunctionError(
            f"environment.reward_file_path: file {str(path)!r} not found (relative paths are "
            "resolved from the manifest's folder, then the working directory)")
    digest = hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:12]
    module_name = f"agilerl_reward_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise RewardFunctionError(f"environment.reward_file_path: {file} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise RewardFunctionError(
            f"environment.reward_file_path: importing {file} failed: "
            f"{type(exc).__name__}: {exc}") from exc
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items()
                       if callable(v) and not n.startswith("_") and inspect.isfunction(v))
        raise RewardFunctionError(
            f"environment.reward_fn_name: {file} defines no function {name!r} "
            f"(functions there: {', '.join(found) or 'none'})")
    return fn


def reward_caller(fn: Callable[..., Any]) -> Callable[[str, object, object], float]:
    """``(completion, answer, question) -> float`` calling ``fn`` with its own argument
    names; a non-numeric or non-finite result is a :class:`RewardFunctionError`."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    by_name: dict[str, str] = {}
    for param in params:
        for role, names in _ROLES.items():
            if param.name in names and role not in by_name.values():
                by_name[param.name] = role
    named = len(by_name) == len(params) and params

    def call(completion: str, answer: object, question: object) -> float:
        values = {"completion": completion, "answer": answer, "question": question}
        try:
            if named:
                result = fn(**{p: values[r] for p, r in by_name.items()})
            else:
                result = fn(completion, answer, question)
        except Exception as exc:
            raise RewardFunctionError(
                f"environment.reward_fn_name: {getattr(fn, '__name__', fn)!r} raised "
                f"{type(exc).__name__}: {exc}") from exc
        try:
            value = float(result)
        except (TypeError, ValueError):
            raise RewardFunctionError(
                f"environment.reward_fn_name: {getattr(fn, '__name__', fn)!r} returned "
                f"{result!r}, not a number") from None
        if not math.isfinite(value):
            raise RewardFunctionError(
                f"environment.reward_fn_name: {getattr(fn, '__name__', fn)!r} returned {value}")
        return value

    return call
