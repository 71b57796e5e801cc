"""Optimizers over evolvable networks, and carrying their state across mutations.

``Adam`` is a small optimizer of our own rather than ``torch.optim.Adam``: constructing or
stepping a ``torch.optim`` optimizer imports ``torch._dynamo`` (about 0.8 s and 70 MB before
the first training step) and runs ~150 us of Python bookkeeping per step, which is a
tenth of a DQN update on these small networks. The maths is the same kernel
``torch.optim.Adam(fused=True)`` calls (``torch._fused_adam_``), so updates are bitwise
identical to it, and ``state_dict`` uses its layout (checkpoints load either way).

After an architecture mutation the parameters are new tensors, so the optimizer is
rebuilt. Adam's moment estimates are carried over by parameter name (network position +
parameter path), or from where the mutation moved the parameter (the output layer of an
MLP that gained or lost a hidden layer: the network's ``parameter_sources``): a parameter
with the same shape keeps its moments and step count; a resized one keeps the overlapping
slice (new entries start at zero); a parameter that did not exist before starts fresh. This keeps the effective step size of the untouched part of
the network unchanged instead of restarting Adam's bias correction for everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypedDict, cast

import torch
from torch import nn

#: Per-parameter state keys of ``Adam`` (``step`` is a float32 scalar tensor).
STATE_KEYS = ("step", "exp_avg", "exp_avg_sq")


class SavedParamGroup(TypedDict, total=False):
    """A parameter group of a ``state_dict``: parameters by index (``torch.optim.Adam``'s
    has more settings, which are not read)."""

    params: list[int]
    lr: float
    betas: tuple[float, ...]
    eps: float


class AdamStateDict(TypedDict):
    """``Adam.state_dict()``, in ``torch.optim``'s layout."""

    state: dict[int, dict[str, torch.Tensor]]
    param_groups: list[SavedParamGroup]


class Adam:
    """Adam without weight decay or AMSGrad: what the algorithms here use.

    ``param_groups`` (a list of dicts with ``params``, ``lr``, ``betas``, ``eps``) and
    ``state`` (parameter -> ``{"step", "exp_avg", "exp_avg_sq"}``) have the meaning they
    have in ``torch.optim``; setting ``group["lr"]`` changes the learning rate.

    Step counters: parameters whose counters are equal share one scalar tensor, so a step
    increments one counter instead of one per parameter. ``step`` splits a shared counter
    before incrementing it if some of its parameters got no gradient, so every parameter
    still counts exactly the steps that updated it.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        params = list(params)
        if not params:
            raise ValueError("Adam got an empty parameter list")
        if lr < 0.0 or eps < 0.0 or not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"invalid Adam settings: lr={lr}, betas={betas}, eps={eps}")
        # As ``torch.optim.Optimizer.param_groups`` (callers handle both): ``params``, ``lr``,
        # ``betas``, ``eps``, and whatever a caller adds (a scheduler's ``initial_lr``).
        self.param_groups: list[dict[str, Any]] = [
            {"params": params, "lr": float(lr), "betas": tuple(betas), "eps": float(eps)}
        ]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def __repr__(self) -> str:
        group = self.param_groups[0]
        return f"Adam(lr={group['lr']}, betas={group['betas']}, eps={group['eps']})"

    # ------------------------------------------------------------------ stepping
    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        for group in self.param_groups:
            params: list[torch.Tensor] = []
            grads: list[torch.Tensor] = []
            avgs: list[torch.Tensor] = []
            sqs: list[torch.Tensor] = []
            steps: list[torch.Tensor] = []
            skipped = False
            fresh: list[torch.Tensor] = []
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    skipped = True
                    continue
                state = self.state.get(p)
                if not state:
                    fresh.append(p)
                    continue
                params.append(p)
                grads.append(grad)
                avgs.append(state["exp_avg"])
                sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
            if fresh:  # lazy initialisation: zero moments, one shared zero counter
                counter: dict[torch.device, torch.Tensor] = {}
                for p in fresh:
                    if p.device not in counter:
                        counter[p.device] = torch.zeros((), dtype=torch.float32, device=p.device)
                    state = {
                        "step": counter[p.device],
                        "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                        "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                    }
                    self.state[p] = state
                    params.append(p)
                    grads.append(p.grad)  # type: ignore[arg-type]
                    avgs.append(state["exp_avg"])
                    sqs.append(state["exp_avg_sq"])
                    steps.append(state["step"])
            if not params:
                continue
            if skipped:
                steps = self._unshare_idle_counters(group["params"], params, steps)
            for counter_tensor in {id(s): s for s in steps}.values():
                counter_tensor.add_(1.0)
            beta1, beta2 = group["betas"]
            torch._fused_adam_(
                params,
                grads,
                avgs,
                sqs,
                [],
                steps,
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=0.0,
                eps=group["eps"],
                amsgrad=False,
                maximize=False,
            )

    def _unshare_idle_counters(
        self,
        all_params: Sequence[torch.Tensor],
        params: Sequence[torch.Tensor],
        steps: list[torch.Tensor],
    ) -> list[torch.Tensor]:
        """Give stepped parameters their own counters where an idle one shares theirs."""
        stepped = {id(p) for p in params}
        idle = {
            id(self.state[p]["step"])
            for p in all_params
            if id(p) not in stepped and self.state.get(p)
        }
        if not idle:
            return steps
        copies: dict[int, torch.Tensor] = {}
        for i, (p, counter) in enumerate(zip(params, steps, strict=True)):
            if id(counter) in idle:
                if id(counter) not in copies:
                    copies[id(counter)] = counter.clone()
                steps[i] = self.state[p]["step"] = copies[id(counter)]
        return steps

    def share_step_counters(self) -> None:
        """Make parameters with equal step counts (same device) share one counter tensor."""
        shared: dict[tuple[float, torch.device], torch.Tensor] = {}
        for state in self.state.values():
            counter = state.get("step")
            if counter is None:
                continue
            key = (float(counter), counter.device)
            state["step"] = shared.setdefault(key, counter)

    # ------------------------------------------------------------------ state
    def _params(self) -> list[torch.Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self) -> AdamStateDict:
        """``{"state": {index: {...}}, "param_groups": [...]}`` (``torch.optim`` layout).

        Tensors are the optimizer's own (not copies), as in ``torch.optim``.
        """
        index = {id(p): i for i, p in enumerate(self._params())}
        groups = [
            cast(
                SavedParamGroup,
                {
                    **{k: v for k, v in g.items() if k != "params"},
                    "params": [index[id(p)] for p in g["params"]],
                },
            )
            for g in self.param_groups
        ]
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: AdamStateDict) -> None:
        """Load a ``state_dict`` (ours or ``torch.optim.Adam``'s); tensors are copied, so
        the optimizer never shares memory with ``state_dict``."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
            len(g["params"]) != len(own["params"])
            for g, own in zip(groups, self.param_groups, strict=False)
        ):
            raise ValueError("optimizer state does not match the parameter groups")
        saved = state_dict["state"]
        new_state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        for group, own in zip(groups, self.param_groups, strict=True):
            own["lr"] = float(group["lr"])
            own["betas"] = (float(group["betas"][0]), float(group["betas"][1]))
            own["eps"] = float(group["eps"])
            for key, p in zip(group["params"], own["params"], strict=True):
                entry = saved.get(key)
                if entry:
                    new_state[p] = _copy_param_state(entry, p)
        self.state = new_state
        self.share_step_counters()


def _copy_param_state(
    entry: Mapping[str, torch.Tensor], param: torch.Tensor
) -> dict[str, torch.Tensor]:
    missing = [k for k in STATE_KEYS if k not in entry]
    if missing:
        raise ValueError(f"optimizer state lacks {', '.join(missing)}")
    step = torch.as_tensor(entry["step"], dtype=torch.float32)
    state = {"step": step.detach().to(param.device, copy=True).reshape(())}
    for key in ("exp_avg", "exp_avg_sq"):
        value = entry[key]
        if tuple(value.shape) != tuple(param.shape):
            raise ValueError(
                f"optimizer state {key} has shape {tuple(value.shape)}, "
                f"parameter has {tuple(param.shape)}"
            )
        state[key] = value.detach().to(param.device, param.dtype, copy=True)
    return state


def named_parameters(nets: Sequence[nn.Module]) -> Iterator[tuple[str, nn.Parameter]]:
    for i, net in enumerate(nets):
        for name, param in net.named_parameters():
            yield f"{i}.{name}", param


def make_optimizer(nets: Sequence[nn.Module], lr: float) -> Adam:
    """Adam over the parameters of ``nets``."""
    params = [p for _, p in named_parameters(nets)]
    return Adam(params, lr=lr)


def state_by_name(opt: Adam, nets: Sequence[nn.Module]) -> dict[str, dict[str, torch.Tensor]]:
    """Per-parameter optimizer state keyed by parameter name (call before mutating)."""
    return {name: dict(opt.state[p]) for name, p in named_parameters(nets) if p in opt.state}


def carry_learning_rates(opt: Adam, old: Adam) -> None:
    """Give a rebuilt optimizer ``opt`` the learning rates in effect in ``old``, the one
    it replaces (an annealed rate is state the mutation must not reset)."""
    for group, previous in zip(opt.param_groups, old.param_groups, strict=True):
        group["lr"] = previous["lr"]


def carry_state(
    opt: Adam,
    nets: Sequence[nn.Module],
    old: Mapping[str, Mapping[str, torch.Tensor]],
    sources: Mapping[str, str | None] | None = None,
) -> None:
    """Load ``old`` (from ``state_by_name``) into a freshly built optimizer ``opt``.

    A parameter takes the state of its namesake, or of ``sources[name]`` where the mutation
    moved it (None: it starts fresh); see :func:`optimizer_sources`.
    """
    for name, param in named_parameters(nets):
        source = sources.get(name, name) if sources else name
        prev = old.get(source) if source is not None else None
        if not prev:
            continue
        state: dict[str, torch.Tensor] = {}
        for key, value in prev.items():
            if isinstance(value, torch.Tensor) and value.shape == param.shape:
                state[key] = value.clone()
            elif isinstance(value, torch.Tensor) and value.dim() == param.dim() and value.dim() > 0:
                fresh = torch.zeros_like(param, memory_format=torch.preserve_format)
                index = tuple(
                    slice(0, min(a, b)) for a, b in zip(fresh.shape, value.shape, strict=False)
                )
                fresh[index] = value[index]
                state[key] = fresh
            elif isinstance(value, torch.Tensor):
                state[key] = value.clone()  # scalar step counter
        opt.state[param] = state
    opt.share_step_counters()


def optimizer_sources(
    network_names: Sequence[str], sources: Mapping[str, Mapping[str, str | None]]
) -> dict[str, str | None]:
    """Networks' ``parameter_sources`` (network name -> {new: old}) as the names
    :func:`named_parameters` gives an optimizer over ``network_names``, for
    :func:`carry_state`."""
    out: dict[str, str | None] = {}
    for i, network in enumerate(network_names):
        for new, old in sources.get(network, {}).items():
            out[f"{i}.{new}"] = None if old is None else f"{i}.{old}"
    return out


def network_parameter_sources(
    networks: Mapping[str, nn.Module], names: Sequence[str], plan: Mapping[str, object]
) -> dict[str, dict[str, str | None]]:
    """``parameter_sources(plan)`` of each of ``networks[names]`` that has one (call
    before mutating): network name -> {new parameter name: old name or None}."""
    out: dict[str, dict[str, str | None]] = {}
    for name in names:
        sources = getattr(networks[name], "parameter_sources", None)
        if sources is not None:
            out[name] = sources(plan)
    return out
