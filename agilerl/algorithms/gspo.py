"""GSPO: Group Sequence Policy Optimisation.

GRPO's group-relative advantages with a sequence-level importance ratio: the
length-normalised ratio of the whole completion, ``exp(mean_t log(pi/pi_old))``, clipped
once per completion (``clip_coef``); every token of a completion shares it.
"""

from __future__ import annotations

from typing import ClassVar

from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.grpo import GRPO
from agilerl.models._generated.hyperparameter_attributes import GSPOHyperparameterAttributes


@registered
class GSPO(GSPOHyperparameterAttributes, GRPO):
    """GRPO with a sequence-level importance ratio (``importance_sampling_level`` null)."""

    algo = "GSPO"
    default_ratio_level: ClassVar[str] = "sequence"
