"""The ``multiturn`` environment: episodes of a text game, one completion per turn.

The game is a GEM environment (``env_name`` such as ``game:GuessTheNumber-v0-easy``, from
the ``gem-llm`` package; its games run offline) or a custom ``entrypoint``
(``"<module-or-file>:<callable>"`` called with ``env_config``). Either follows the
Gymnasium text API: ``reset(seed) -> (observation, info)`` and
``step(text) -> (observation, reward, terminated, truncated, info)``.

An episode is a chat: the observation is the user's message, the member's completion the
assistant's answer, for at most ``max_turns`` turns (or until the conversation would not
fit in ``network.max_context_length``). Each turn is a training row credited with its
return-to-go (``advantage_granularity`` ``turn`` or ``auto``; discounted by the algorithm's
``gamma`` where it has one) or with the episode return (``trajectory``). GRPO-style
algorithms compare the ``group_size`` episodes played from the same seed. The training
loop over these episodes is :mod:`agilerl.training.llm_multiturn`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, SupportsFloat

import numpy as np

from agilerl.checkpoint.rng import derive_seed
from agilerl.core.errors import EnvironmentSetupError, MissingExtraError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from agilerl.llm.members import Generator
    from agilerl.models import LLMEnvSpec

#: Turns per episode when neither the manifest nor the environment says.
DEFAULT_MAX_TURNS = 8
_TEST_SEEDS = 0x7E57


class TextGame(Protocol):
    """One game of a multi-turn environment (GEM's, or the user's entrypoint's): text in,
    text out, with a Gymnasium-style ``reset``/``step``."""

    def reset(self, seed: int | None = None) -> tuple[object, object]:
        """``(observation, info)``: the opening message."""
        ...

    def step(self, text: str) -> tuple[object, SupportsFloat, bool, bool, object]:
        """``(observation, reward, terminated, truncated, info)`` of one reply."""
        ...


def make_multiturn_env_factory(spec: LLMEnvSpec, base_dir: str | None = None
                               ) -> Callable[[], TextGame]:
    """A function building one fresh game of ``spec`` (GEM ``env_name`` or ``entrypoint``)."""
    if spec.entrypoint:
        from agilerl.envs.entrypoint import resolve_entrypoint

        target = resolve_entrypoint(str(spec.entrypoint), base_dir)
        config = dict(spec.env_config or {})
        return lambda: target(**config)
    name = str(spec.env_name)
    try:
        import gem
    except ImportError as exc:
        raise MissingExtraError(
            f"environment.env_name = {name!r} is a GEM environment, which needs the Python "
            "package 'gem-llm'. Install it with: pip install 'agilerl[multiturn]' (or pip "
            "install gem-llm), or give environment.entrypoint: '<module-or-file>:<callable>' "
            "for your own multi-turn environment") from exc
    try:
        gem.make(name)
    except Exception as exc:
        raise ValueError(f"environment.env_name = {name!r}: GEM cannot build it "
                         f"({type(exc).__name__}: {exc})") from exc
    return lambda: gem.make(name)


@dataclass
class Episode:
    """One played episode: the prompt and completion tokens and the reward of each turn."""

    group: int
    prompts: list[list[int]] = field(default_factory=list)
    completions: list[list[int]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    done: bool = False

    @property
    def ret(self) -> float:
        return float(sum(self.rewards))


class MultiTurnEnv:
    """Episodes of a text game played by a member (see module docstring)."""

    def __init__(self, spec: LLMEnvSpec, tokenizer: PreTrainedTokenizerBase, *, seed: int = 0,
                 max_context_length: int | None = None, evaluation_interval: int = 1,
                 base_dir: str | None = None) -> None:
        self.spec = spec
        self.tokenizer = tokenizer
        self.seed = int(seed)
        self.max_reward = spec.max_reward
        self.evaluation_interval = max(int(evaluation_interval), 1)
        self.max_context_length = max_context_length
        self.name = str(spec.env_name or spec.entrypoint)
        self.factory = make_multiturn_env_factory(spec, base_dir)
        self.max_turns = int(spec.max_turns or self._probe_max_turns())

    def _probe_max_turns(self) -> int:
        game = self.factory()
        for name in ("max_turns", "max_attempts"):
            value = getattr(game, name, None) or getattr(getattr(game, "unwrapped", None),
                                                          name, None)
            if isinstance(value, int) and value > 0:
                return value
        return DEFAULT_MAX_TURNS

    def reset(self, seed: int | None = None) -> None:
        """Nothing to reset: episodes are seeded by the member's step (the loops' API)."""
        return None

    def close(self) -> None:
        return None

    # ------------------------------------------------------------------ playing
    def _prompt(self, messages: list[dict[str, str]]) -> list[int]:
        from agilerl.llm.reasoning import render_prompt

        return render_prompt(self.tokenizer, messages)

    def play(self, agent: Generator, seeds: list[int], groups: list[int], *,
             greedy: bool) -> list[Episode]:
        """Play one episode per seed, all turns of live episodes generated as one batch."""
        games = [self.factory() for _ in seeds]
        episodes = [Episode(group=g) for g in groups]
        for game, episode, seed in zip(games, episodes, seeds, strict=True):
            observation, info = game.reset(seed=int(seed))
            episode.messages.append({"role": "user", "content": _text(observation, info)})
        for turn in range(self.max_turns):
            live = [i for i, e in enumerate(episodes) if not e.done]
            prompts = {i: self._prompt(episodes[i].messages) for i in live}
            live = [i for i in live if self._fits(prompts[i], agent)]
            if turn == 0 and len(live) < len(prompts):
                self._refuse_opening(max(len(prompts[i]) for i in prompts), agent)
            for i in set(prompts) - set(live):
                episodes[i].done = True
            if not live:
                break
            rollout = agent.generate([prompts[i] for i in live], greedy=greedy)
            lengths = rollout.completion_mask.sum(dim=1).tolist()
            for row, i in enumerate(live):
                self._step(games[i], episodes[i], prompts[i],
                           rollout.completion_ids[row, :int(lengths[row])].tolist(),
                           rollout.texts[row])
        for game in games:
            _close(game)
        return episodes

    def _fits(self, prompt: list[int], agent: Generator) -> bool:
        limit = min(self.max_context_length or agent.context_limit, agent.context_limit)
        return len(prompt) < int(limit) - 1

    def _refuse_opening(self, length: int, agent: Generator) -> None:
        """An opening prompt that leaves no room for a reply would make an episode of no
        turns: nothing to learn from, and no sign of why (a run of empty steps)."""
        raise EnvironmentSetupError(
            f"environment: the game {self.name!r} opens with a prompt of {length} tokens, "
            "which leaves no room for a reply within network.max_context_length = "
            f"{min(self.max_context_length or agent.context_limit, agent.context_limit)}; "
            "raise network.max_context_length (up to the model's own position limit)")

    def _step(self, game: TextGame, episode: Episode, prompt: list[int], completion: list[int],
              text: str) -> None:
        observation, reward, terminated, truncated, info = game.step(text)
        episode.prompts.append(prompt)
        episode.completions.append(completion)
        episode.rewards.append(float(reward))
        episode.messages.append({"role": "assistant", "content": text})
        episode.messages.append({"role": "user", "content": _text(observation, info)})
        episode.done = bool(terminated or truncated)

    def episode_seeds(self, step: int, count: int) -> list[int]:
        return [derive_seed(self.seed, int(step), i) for i in range(count)]

    def accuracy(self, returns: np.ndarray) -> float:
        if self.max_reward is None or returns.size == 0:
            return math.nan
        return float(np.mean(returns >= float(self.max_reward) - 1e-9))

    def evaluate(self, agent: Generator, loop: int = 1) -> float:
        """Mean return of greedy episodes from fixed held-out seeds (``batch_size`` of them)."""
        count = int(getattr(agent, "batch_size", 8))
        seeds = [derive_seed(self.seed, _TEST_SEEDS, i) for i in range(count)]
        returns = [e.ret for _ in range(max(int(loop), 1))
                   for e in self.play(agent, seeds, list(range(count)), greedy=True)]
        return float(np.mean(returns))


def _text(observation: object, info: object) -> str:
    text = str(observation)
    suffix = info.get("suffix") if isinstance(info, dict) else None
    if suffix and suffix not in text:
        text = f"{text}\n{suffix}"
    return text


def _close(game: object) -> None:
    close = getattr(game, "close", None)
    if callable(close):
        close()
