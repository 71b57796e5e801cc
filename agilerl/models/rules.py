"""Rules a JSON Schema cannot express (spec §3.8, X3-X11), in one place.

Every function reads plain attributes, so the same rules serve the local models, the light
Arena models and plain validated objects. A rule returns a list of :class:`Violation`
(a path relative to the object it was given, and a message); callers either raise the
first one inside a Pydantic validator or turn all of them into located manifest issues.
Message fragments match the reference library's, so code matching on them keeps working.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from agilerl.core.environment_facts import unsupported_table_file

Path = tuple[object, ...]
"""Keys and list indices from a section's root to the value a rule is about."""


@dataclass(frozen=True)
class Violation:
    """A broken rule: where (relative path) and why."""

    path: Path
    message: str
    severity: str = "error"
    """``warning`` for settings that are valid but ignored or likely unintended."""

    def under(self, *prefix: object) -> Violation:
        return Violation((*prefix, *self.path), self.message, self.severity)


def _get(obj: object, name: str, default: object = None) -> Any:
    # Read unvalidated from a raw mapping or a spec: whatever is written there, so each
    # rule compares it as it stands (values of the wrong type are left to the schema).
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _ordered(obj: object, low: str, high: str) -> list[Violation]:
    lo, hi = _get(obj, low), _get(obj, high)
    if lo is not None and hi is not None and lo > hi:
        return [Violation((low,), f"{low} ({lo}) must be less than or equal to {high} ({hi})")]
    return []


def _within(obj: object, value_name: str, low: str, high: str, label: str | None = None) -> list[Violation]:
    value, lo, hi = _get(obj, value_name), _get(obj, low), _get(obj, high)
    if value is None or lo is None or hi is None or lo <= value <= hi:
        return []
    what = label or value_name
    return [Violation((value_name,), f"{what} must be between {low} ({lo}) and {high} ({hi}), got {value}")]


# --------------------------------------------------------------------------- X6 training


def training_rules(training: object) -> list[Violation]:
    """eval_steps > evaluation_interval; evo_steps <= max_steps; eps_start >= eps_end."""
    out: list[Violation] = []
    eval_steps, interval = _get(training, "eval_steps"), _get(training, "evaluation_interval")
    if eval_steps is not None and interval is not None and eval_steps <= interval:
        out.append(Violation(("eval_steps",), f"eval_steps must be greater than "
                             f"evaluation_interval ({eval_steps} <= {interval})"))
    evo, max_steps = _get(training, "evo_steps"), _get(training, "max_steps")
    if evo is not None and max_steps is not None and evo > max_steps:
        out.append(Violation(("evo_steps",), f"evo_steps ({evo}) must be less than or equal to "
                             f"max_steps ({max_steps})"))
    start, end = _get(training, "eps_start"), _get(training, "eps_end")
    if start is not None and end is not None and start < end:
        out.append(Violation(("eps_start",), f"eps_start ({start}) must be greater than or equal "
                             f"to eps_end ({end})"))
    return out


# --------------------------------------------------------------------------- evolution

#: The mutation kinds one is drawn from (``new_layer`` only splits ``arch_mut``).
MUTATION_KINDS = ("no_mut", "arch_mut", "params_mut", "act_mut", "rl_hp_mut")


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def mutation_rules(mutation: object) -> list[Violation]:
    """At least one mutation kind has a positive probability; every ``rl_hp_selection``
    range has ``min <= max``. Reads a spec or its raw mapping (values of the wrong type
    are left to the schema)."""
    out: list[Violation] = []
    probabilities = _get(mutation, "probabilities")
    if probabilities is not None:
        # A raw mapping that leaves a kind out (its default applies) is not all zero.
        written = [_get(probabilities, kind) for kind in MUTATION_KINDS]
        if all(_number(p) and p == 0 for p in written):
            out.append(Violation(("probabilities",), "every mutation probability is 0 ("
                                 f"{', '.join(MUTATION_KINDS)}); at least one must be "
                                 "positive (no_mut: 1.0 keeps every agent unchanged)"))
    ranges = _get(mutation, "rl_hp_selection")
    for name, bounds in (ranges.items() if isinstance(ranges, Mapping) else ()):
        low, high = _get(bounds, "min"), _get(bounds, "max")
        if _number(low) and _number(high) and low > high:
            out.append(Violation(("rl_hp_selection", name, "min"), f"the range of {name} is "
                                 f"empty: min ({low}) must be less than or equal to max ({high})"))
    return out


def tournament_rule(selection: object, pop_size: object) -> list[Violation]:
    """A tournament larger than the population is accepted (the reference library draws
    entrants with replacement, so such manifests exist), with a warning: our tournaments
    draw distinct agents, so each one is the whole population and the best agent always
    wins. A population of one agent has nothing to select, so it gets no warning."""
    size = _get(selection, "tournament_size")
    if _number(size) and _number(pop_size) and pop_size > 1 and size > pop_size:
        return [Violation(("tournament_size",), f"tournament_size ({size}) exceeds "
                          f"training.pop_size ({pop_size}): tournaments draw distinct agents, "
                          "so each is the whole population and the best agent always wins",
                          severity="warning")]
    return []


# --------------------------------------------------------------------------- X7, X8 algorithms


def algorithm_rules(name: str, spec: object) -> list[Violation]:
    """RainbowDQN v_min < v_max; LLM RL algorithms need vllm_config when use_vllm is set."""
    out: list[Violation] = []
    v_min, v_max = _get(spec, "v_min"), _get(spec, "v_max")
    if name == "RainbowDQN" and v_min is not None and v_max is not None and v_min >= v_max:
        out.append(Violation(("v_min",), f"v_min must be less than v_max. (got {v_min} >= {v_max})"))
    if _get(spec, "use_vllm") and not _get(spec, "vllm_config"):
        out.append(Violation(("vllm_config",), "VLLM config is not set but use_vllm is true; "
                             "add a vllm_config block or set use_vllm: false"))
    return out


# --------------------------------------------------------------------------- X9 networks


def mlp_rules(mlp: object) -> list[Violation]:
    out = _ordered(mlp, "min_hidden_layers", "max_hidden_layers")
    out += _ordered(mlp, "min_mlp_nodes", "max_mlp_nodes")
    hidden = _get(mlp, "hidden_size")
    lo, hi = _get(mlp, "min_hidden_layers"), _get(mlp, "max_hidden_layers")
    if isinstance(hidden, Sequence) and lo is not None and hi is not None and not lo <= len(hidden) <= hi:
        bound = (f"greater than or equal to min_hidden_layers ({lo})" if len(hidden) < lo
                 else f"less than or equal to max_hidden_layers ({hi})")
        out.append(Violation(("hidden_size",), f"hidden_size must be {bound} (the number of "
                             f"hidden layers is {len(hidden)})"))
    nodes_lo, nodes_hi = _get(mlp, "min_mlp_nodes"), _get(mlp, "max_mlp_nodes")
    if isinstance(hidden, Sequence) and nodes_lo is not None and nodes_hi is not None:
        for index, size in enumerate(hidden):
            if isinstance(size, int) and not nodes_lo <= size <= nodes_hi:
                out.append(Violation(("hidden_size", index), "hidden_size elements must be "
                                     f"{_bound(size, nodes_lo, nodes_hi, 'mlp_nodes')}, got {size}"))
    return out


def _bound(value: float, low: float, high: float, name: str) -> str:
    """The side of ``[min_<name>, max_<name>]`` that ``value`` is outside of, in the
    reference's wording."""
    if value < low:
        return f"greater than or equal to min_{name} ({low})"
    return f"less than or equal to max_{name} ({high})"


def cnn_rules(cnn: object) -> list[Violation]:
    out = _ordered(cnn, "min_hidden_layers", "max_hidden_layers")
    out += _ordered(cnn, "min_channel_size", "max_channel_size")
    channels = _get(cnn, "channel_size")
    kernels, strides = _get(cnn, "kernel_size"), _get(cnn, "stride_size")
    lo, hi = _get(cnn, "min_hidden_layers"), _get(cnn, "max_hidden_layers")
    if isinstance(channels, Sequence) and lo is not None and hi is not None and not lo <= len(channels) <= hi:
        out.append(Violation(("channel_size",), f"hidden_layers must be between min_hidden_layers "
                             f"({lo}) and max_hidden_layers ({hi}), got {len(channels)} "
                             "(the length of channel_size)"))
    c_lo, c_hi = _get(cnn, "min_channel_size"), _get(cnn, "max_channel_size")
    if isinstance(channels, Sequence) and c_lo is not None and c_hi is not None:
        for index, size in enumerate(channels):
            if isinstance(size, int) and not c_lo <= size <= c_hi:
                out.append(Violation(("channel_size", index), "channel_size must be "
                                     f"{_bound(size, c_lo, c_hi, 'channel_size')}, got {size}"))
    lengths = [len(v) for v in (channels, kernels, strides) if isinstance(v, Sequence)]
    if len(lengths) == 3 and len(set(lengths)) > 1:
        out.append(Violation(("kernel_size",), "channel_size, kernel_size and stride_size must "
                             f"have the same length (got {lengths[0]}, {lengths[1]}, {lengths[2]})"))
    return out


def lstm_rules(lstm: object) -> list[Violation]:
    out = _ordered(lstm, "min_hidden_state_size", "max_hidden_state_size")
    out += _ordered(lstm, "min_layers", "max_layers")
    out += _within(lstm, "hidden_state_size", "min_hidden_state_size", "max_hidden_state_size")
    out += _within(lstm, "num_layers", "min_layers", "max_layers")
    return out


def simba_rules(simba: object) -> list[Violation]:
    out = _ordered(simba, "min_blocks", "max_blocks")
    out += _ordered(simba, "min_mlp_nodes", "max_mlp_nodes")
    out += _within(simba, "num_blocks", "min_blocks", "max_blocks")
    size, lo, hi = _get(simba, "hidden_size"), _get(simba, "min_mlp_nodes"), _get(simba, "max_mlp_nodes")
    if isinstance(size, int) and lo is not None and hi is not None and not lo <= size <= hi:
        out.append(Violation(("hidden_size",), "hidden_size must be "
                             f"{_bound(size, lo, hi, 'mlp_nodes')}, got {size}"))
    return out


def multi_input_rules(spec: object) -> list[Violation]:
    out = _ordered(spec, "min_latent_dim", "max_latent_dim")
    out += _within(spec, "latent_dim", "min_latent_dim", "max_latent_dim")
    for key, rule in (("mlp_config", mlp_rules), ("cnn_config", cnn_rules)):
        sub = _get(spec, key)
        if sub is not None:
            out += [v.under(key) for v in rule(sub)]
    return out


ENCODER_RULES = {
    "mlp": mlp_rules,
    "cnn": cnn_rules,
    "lstm": lstm_rules,
    "simba": simba_rules,
    "multiinput": multi_input_rules,
}


def encoder_rules(arch: str | None, encoder: object) -> list[Violation]:
    rule = ENCODER_RULES.get(arch or "")
    return rule(encoder) if rule else []


def network_rules(network: object, arch: str | None = None) -> list[Violation]:
    """NetworkSpec latent-dim ordering plus the encoder's and head's own rules."""
    out = _ordered(network, "min_latent_dim", "max_latent_dim")
    out += _within(network, "latent_dim", "min_latent_dim", "max_latent_dim")
    encoder = _get(network, "encoder_config")
    if encoder is not None:
        kind = arch or _get(encoder, "arch")
        out += [v.under("encoder_config") for v in encoder_rules(kind, encoder)]
    head = _get(network, "head_config")
    if head is not None:
        out += [v.under("head_config") for v in mlp_rules(head)]
    return out


# --------------------------------------------------------------------------- X10, X5 MF-PBT


def frequency_ratio_rules(selection: object) -> list[Violation]:
    """Ratios: one per subpopulation, each >= 1, strictly increasing."""
    ratios = _get(selection, "evolution_frequency_ratios")
    n_sub = _get(selection, "n_subpopulations")
    if not ratios:
        return []
    out = []
    if n_sub is not None and len(ratios) != n_sub:
        out.append(Violation(("evolution_frequency_ratios",), f"evolution_frequency_ratios has "
                             f"length {len(ratios)}; it needs one entry per subpopulation "
                             f"(n_subpopulations = {n_sub})"))
    if any(r < 1 for r in ratios):
        out.append(Violation(("evolution_frequency_ratios",),
                             "evolution_frequency_ratios must all be >= 1"))
    if any(b <= a for a, b in zip(ratios, ratios[1:], strict=False)):
        out.append(Violation(("evolution_frequency_ratios",),
                             "evolution_frequency_ratios must be strictly increasing"))
    return out


def default_frequency_ratios(n_subpopulations: int) -> list[int]:
    """``[1, 5, 10, ...]``: 1, then 5 x i."""
    return [1] + [5 * i for i in range(1, n_subpopulations)]


@dataclass(frozen=True)
class MFLayout:
    n_winners: int
    n_survivors: int
    n_open_for_migration: int
    n_losers: int


def mf_layout(selection: object, pop_size: int | None, pop_size_given: bool) -> tuple[MFLayout | None, list[Violation]]:
    """Resolve the MF-PBT bracket sizes for a population (paths relative to the manifest root:
    ``training.*`` or ``selection.*`` where ``selection`` is replaced by the key written)."""
    if not pop_size_given or pop_size is None:
        return None, [Violation(("training", "pop_size"), "pop_size is required in the training "
                                "block. when selection_strategy.strategy is multi_frequency")]
    n_sub = _get(selection, "n_subpopulations") or 2
    if pop_size < 6:
        return None, [Violation(("training", "pop_size"), f"population_size must be >= 6 for "
                                f"multi-frequency selection, got {pop_size}")]
    if pop_size % n_sub:
        return None, [Violation(("selection", "n_subpopulations"), f"population_size ({pop_size}) "
                                f"must be divisible by n_subpopulations ({n_sub})")]
    size = pop_size // n_sub
    if size < 3:
        return None, [Violation(("training", "pop_size"), f"population_size // n_subpopulations "
                                f"({size}) must be >= 3 so each subpopulation has a winner, an "
                                "open slot and a loser")]
    quarter = round(0.25 * size)
    winners = _get(selection, "n_winners")
    survivors = _get(selection, "n_survivors")
    open_ = _get(selection, "n_open_for_migration")
    winners = quarter if winners is None else winners
    survivors = 0 if survivors is None else survivors
    open_ = quarter if open_ is None else open_
    losers = _get(selection, "n_losers")
    losers = size - winners - survivors - open_ if losers is None else losers
    out = []
    for name, value, low in (("n_winners", winners, 1), ("n_survivors", survivors, 0),
                             ("n_open_for_migration", open_, 1), ("n_losers", losers, 1)):
        if value < low:
            out.append(Violation(("selection", name), f"{name} must be >= {low}, got {value}"))
    total = winners + survivors + open_ + losers
    if not out and total != size:
        out.append(Violation(("selection",), f"n_winners + n_survivors + n_open_for_migration + "
                             f"n_losers ({total}) must equal population_size // n_subpopulations "
                             f"({size})"))
    if out:
        return None, out
    return MFLayout(winners, survivors, open_, losers), []


# --------------------------------------------------------------------------- X3, X4 manifest


def simba_recurrent_rule(algorithm: object, network: object) -> list[Violation]:
    """A recurrent PPO cannot use a SimBa encoder (flag or ``arch: simba``)."""
    if not _get(algorithm, "recurrent") or not isinstance(network, Mapping):
        return []
    encoder = network.get("encoder_config")
    arch = network.get("arch") or (encoder.get("arch") if isinstance(encoder, Mapping) else None)
    if network.get("simba") or arch == "simba":
        return [Violation(("algorithm", "recurrent"), "recurrent and SimBa (network.simba / "
                          "arch: simba) cannot both be set")]
    return []


def llm_model_rule(algorithm: object) -> list[Violation]:
    if not _get(algorithm, "pretrained_model_name_or_path"):
        return [Violation(("algorithm", "pretrained_model_name_or_path"),
                          "Required field 'pretrained_model_name_or_path' wasn't found in the "
                          "algorithm or network section")]
    return []


# --------------------------------------------------------------------------- across sections

#: Training fields LLM fine-tuning does not use, with their defaults.
_LLM_IGNORED_TRAINING = {"target_score": None, "eval_steps": None, "eval_loop": 1,
                         "learning_delay": 0, "eps_start": None, "eps_end": None,
                         "eps_decay": None, "overwrite_checkpoints": False}


def replay_buffer_rules(algorithm: object, buffer: object) -> list[Violation]:
    """Prioritised replay only for algorithms that learn from it; algorithms without a buffer
    ignore the section; multi-agent buffers ignore the n-step and PER flags."""
    if buffer is None:
        return []
    name = getattr(algorithm, "algo_name", "")
    uses_buffer = any(getattr(algorithm, flag, False) for flag in ("off_policy", "offline", "bandit"))
    if not uses_buffer:
        return [Violation(("replay_buffer",), f"{name} does not use a replay buffer; this "
                          "section is ignored", "warning")]
    multi_agent = getattr(getattr(algorithm, "agent_type", None), "value", "") == "multi_agent"
    if multi_agent and (_get(buffer, "per_buffer") or _get(buffer, "n_step_buffer")):
        return [Violation(("replay_buffer",), f"{name} always uses a plain replay buffer; "
                          "n_step_buffer and per_buffer are ignored", "warning")]
    refusal = prioritized_replay_refusal(algorithm) if _get(buffer, "per_buffer") else None
    return [Violation(("replay_buffer", "per_buffer"), refusal)] if refusal else []


def prioritized_replay_refusal(algorithm: object) -> str | None:
    """Why ``per_buffer`` cannot serve ``algorithm``, or None: only an algorithm whose
    ``replay_features`` (``x-agilerl`` in its schema) include ``per`` learns from priorities."""
    if "per" in getattr(algorithm, "replay_features", frozenset()):
        return None
    from agilerl.models._generated.registry import REGISTRY

    learners = [re.sub(r"([a-z])([A-Z])", r"\1 \2", entry.name)
                for entry in REGISTRY.values() if "per" in entry.replay_features]
    name = getattr(algorithm, "algo_name", "") or type(algorithm).__name__
    return f"PER buffer is only supported for {' and '.join(learners)}, not {name}"


def llm_training_rules(training: object, multiturn: bool) -> list[Violation]:
    """Training fields LLM fine-tuning ignores (warnings), and ``max_wall_seconds``, which only
    multi-turn LLM runs use."""
    out = []
    ignored = [name for name, default in _LLM_IGNORED_TRAINING.items()
               if _get(training, name, default) != default]
    if ignored:
        out.append(Violation(("training", ignored[0]), "TrainingSpec fields not supported by "
                             f"LLM fine-tuning are ignored: {', '.join(ignored)}", "warning"))
    if _get(training, "max_wall_seconds") is not None and not multiturn:
        out.append(max_wall_seconds_warning())
    return out


def max_wall_seconds_warning() -> Violation:
    return Violation(("training", "max_wall_seconds"), "max_wall_seconds only applies to "
                     "multi-turn LLM runs; it is ignored here", "warning")


# --------------------------------------------------------------------------- X11 environments


def offline_env_rules(env: object) -> list[Violation]:
    if not _get(env, "minari_dataset_id") and not _get(env, "dataset_path"):
        return [Violation((), "the offline environment requires either minari_dataset_id or "
                          "dataset_path")]
    return []


def bandit_env_rules(env: object) -> list[Violation]:
    features, targets = _get(env, "features"), _get(env, "targets")
    has_entry = _get(env, "entrypoint") is not None
    if (features is None) != (targets is None):
        missing = "targets" if targets is None else "features"
        return [Violation((missing,), "features and targets must be given together")]
    if features is not None and has_entry:
        return [Violation(("entrypoint",), "give either a dataset (features/targets) or an "
                          "entrypoint, not both")]
    if features is None and not has_entry:
        return [Violation((), "the bandit environment requires either features and targets "
                          "or an entrypoint")]
    # A file the builder could not read is refused here, where its field is known.
    tables = (("features", features), ("targets", targets))
    return [Violation((name,), problem) for name, value in tables
            if isinstance(value, str) and (problem := unsupported_table_file(value)) is not None]


def llm_env_rules(env: object) -> list[Violation]:
    env_type = _get(env, "env_type")
    env_type = getattr(env_type, "value", env_type)
    dataset = _get(env, "dataset") or (env.get("name") if isinstance(env, Mapping) else None)
    if env_type == "reasoning":
        required = (("dataset", dataset, "dataset is required for reasoning environments"),
                    ("reward_file_path", _get(env, "reward_file_path"), "reward_file_path is required for reasoning environments"),
                    ("reward_fn_name", _get(env, "reward_fn_name"), "reward_fn_name is required for reasoning environments"),
                    ("prompt_template", _get(env, "prompt_template"), "Prompt template is required for reasoning environments"))
        return [Violation((key,), msg) for key, value, msg in required if not value]
    if env_type in ("preference", "sft"):
        out = []
        if not dataset:
            needed_by = "SFT" if env_type == "sft" else "preference/SFT"
            out.append(Violation(("dataset",), f"dataset is required for {needed_by} environments"))
        if _get(env, "reward_file_path"):
            out.append(Violation(("reward_file_path",), "reward_file_path is not supported for "
                                 f"{'SFT' if env_type == 'sft' else env_type} environments; "
                                 "remove it"))
        return out
    if env_type == "multiturn":
        has_name, has_entry = bool(_get(env, "env_name")), bool(_get(env, "entrypoint"))
        if has_name == has_entry:
            return [Violation(("env_name",), "Exactly one of env_name or entrypoint is "
                              "required for a multiturn environment")]
        if _get(env, "env_config") and not has_entry:
            return [Violation(("env_config",), "env_config is only used with entrypoint, not env_name")]
    return []
