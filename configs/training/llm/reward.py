"""Reward for the countdown reasoning example: build an equation that hits a target number.

The completion must end with ``<answer>EXPRESSION</answer>``; the expression may use each of
the given numbers at most once with + - * / and parentheses. 1.0 when it evaluates to the
target, 0.1 for a well-formed answer that misses, 0.0 otherwise.
"""

from __future__ import annotations

import ast
import operator
import re
from collections import Counter

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("unsupported expression")


def countdown_reward(completion: str, solution: str, prompt: str) -> float:
    """Score one completion; ``solution`` is the target, ``prompt`` holds the numbers."""
    match = _ANSWER.search(completion)
    if not match:
        return 0.0
    expression = match.group(1).strip()
    numbers = Counter(int(n) for n in re.findall(r"\d+", prompt))
    used = Counter(int(n) for n in re.findall(r"\d+", expression))
    if any(used[n] > numbers[n] for n in used):
        return 0.0
    try:
        value = _evaluate(ast.parse(expression, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError):
        return 0.0
    return 1.0 if abs(value - float(solution)) < 1e-6 else 0.1
