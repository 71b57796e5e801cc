"""The member trainer of a multi-turn LLM environment (:mod:`agilerl.llm.multiturn`):
``steps`` batches of episodes, each turn a training row credited with its return-to-go or
the episode return, then one ``learn``."""

from __future__ import annotations

import math
import time
from typing import cast

import numpy as np

from agilerl.algorithms.core.llm_policy import Experience, PolicyGradientLLM
from agilerl.core.member_training import Agent, Deadline, TrainReport
from agilerl.llm.multiturn import Episode, MultiTurnEnv


class MultiTurnMemberTrainer:
    """``train(agent, steps, seed)``: ``steps`` batches of episodes, then ``learn``; no new
    batch starts once ``deadline`` (the run's ``training.max_wall_seconds``) is spent."""

    def __init__(self, env: MultiTurnEnv, deadline: Deadline | None = None) -> None:
        self.env = env
        self.deadline = deadline

    def experience(self, agent: PolicyGradientLLM, episodes: list[Episode]) -> Experience:
        """One training row per turn, credited as the module docstring says."""
        gamma = float(getattr(agent, "gamma", 1.0))
        by_turn = getattr(agent.spec, "advantage_granularity", "auto") in ("auto", "turn")
        prompts, completions, credit, groups, starts, returns = [], [], [], [], [], []
        for episode in episodes:
            to_go = 0.0
            rtg = []
            for reward in reversed(episode.rewards):
                to_go = reward + gamma * to_go
                rtg.append(to_go)
            rtg.reverse()
            for turn, (prompt, completion) in enumerate(
                    zip(episode.prompts, episode.completions, strict=True)):
                prompts.append(prompt)
                completions.append(completion)
                credit.append(rtg[turn] if by_turn else episode.ret)
                groups.append(episode.group)
                starts.append(turn == 0)
                returns.append(episode.ret)
        rollout = agent.rollout_from_pairs(prompts, completions)
        return Experience(rollout, np.array(credit), groups=np.array(groups),
                          episode_start=np.array(starts), returns=np.array(returns))

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        member = cast(PolicyGradientLLM, agent)  # the members of a multi-turn run
        sums: dict[str, float] = {}
        returns: list[float] = []
        tokens, seconds = 0, 0.0
        done = 0
        deadline = self.deadline
        for _ in range(int(steps)):
            if deadline is not None and deadline.spent():  # training.max_wall_seconds:
                break  # no new batch of episodes
            group = int(getattr(member, "group_size", 1) or 1)
            prompts = self.env.episode_seeds(member.steps[-1], int(member.batch_size))
            seeds = [s for s in prompts for _ in range(group)]
            groups = [i for i in range(len(prompts)) for _ in range(group)]
            start = time.perf_counter()
            episodes = self.env.play(member, seeds, groups, greedy=False)
            seconds += time.perf_counter() - start
            played = [e for e in episodes if e.completions]
            metrics: dict[str, float] = {}
            if played:
                experience = self.experience(member, played)
                metrics = member.learn(experience)
                tokens += experience.rollout.tokens
            episode_returns = np.array([e.ret for e in episodes])
            metrics["accuracy"] = self.env.accuracy(episode_returns)
            metrics["turns"] = float(np.mean([len(e.rewards) for e in episodes]))
            for name, value in metrics.items():
                sums[name] = sums.get(name, 0.0) + float(value)
            returns.extend(episode_returns.tolist())
            member.steps[-1] += 1
            member.scores.append(float(np.mean(episode_returns)))
            done += 1
        report = {name: value / max(done, 1) for name, value in sums.items()}
        report["tokens_per_second"] = tokens / seconds if seconds > 0 else math.nan
        report["reward"] = float(np.mean(returns)) if returns else math.nan
        return TrainReport(steps=done, score=report["reward"], metrics=report)
