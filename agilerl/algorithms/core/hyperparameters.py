"""Hyperparameters backed by an algorithm's generated spec class.

Shared by every algorithm base (:class:`~agilerl.algorithms.core.base.RLAlgorithm`,
:class:`~agilerl.algorithms.core.llm_base.LLMAlgorithm`): validation against the spec
(defaults and bounds live in ``schemas/`` only), the subset mutation may change, setting
one value (learning rates reach the optimizer groups they drive) and the settings an
implementation refuses or ignores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, ClassVar

from agilerl.core.algorithm_spec import CUSTOM_NETWORK_FIELDS

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonScalar
    from agilerl.models.algo import AlgoSpec


_CUSTOM_NETWORK = ("custom network modules are not supported; describe the network in the "
                   "manifest's network section (encoder_config, head_config, latent_dim) or as "
                   "net_config on the algorithm spec")


class SpecHyperparameters:
    """Mixin: ``algo``'s spec fields named in ``hyperparameter_names`` live as attributes."""

    algo: ClassVar[str]
    #: The spec fields the maths reads (``x-agilerl.hyperparameters`` of the schema, set
    #: when the class registers).
    hyperparameter_names: ClassVar[tuple[str, ...]]
    lr_names: ClassVar[tuple[str, ...]] = ("lr",)
    #: Those mutation must not change: flags, sizes fixed by the environment or the
    #: architecture (``x-agilerl.fixed_hyperparameters``).
    fixed_hyperparameters: ClassVar[tuple[str, ...]] = ()
    #: Spec fields this implementation does not read yet: field -> what is missing. A value
    #: other than the schema default is refused when a trainer is built.
    unsupported_settings: ClassVar[dict[str, str]] = {}
    #: Spec fields that change nothing in this implementation as configured (e.g. settings
    #: of a refused mode): field -> why. A value other than the default gets a warning.
    inert_settings: ClassVar[dict[str, str]] = {}

    hp_config: dict[str, dict[str, float]]

    @classmethod
    def spec_class(cls) -> type[AlgoSpec]:
        """The public spec class registered under ``algo`` (e.g. ``DQNSpec``)."""
        from agilerl.models import ALGO_REGISTRY

        return ALGO_REGISTRY[cls.algo]

    @classmethod
    def validate_hyperparameters(cls, hyperparameters: Mapping[str, object]) -> AlgoSpec:
        """Validate ``hyperparameters`` with the spec class; defaults and bounds come from it."""
        spec_cls = cls.spec_class()
        known = set(spec_cls.model_fields)
        for field in spec_cls.model_fields.values():
            if isinstance(field.validation_alias, str):
                known.add(field.validation_alias)
        unknown = sorted(set(hyperparameters) - known)
        if unknown:
            raise TypeError(
                f"{cls.algo} got unexpected hyperparameter(s): {', '.join(map(repr, unknown))}"
            )
        return spec_cls.model_validate(dict(hyperparameters))

    @classmethod
    def spec_from(cls, spec: AlgoSpec | None, hyperparameters: Mapping[str, object]) -> AlgoSpec:
        """The member's validated spec: a copy of ``spec`` when given (validated when the
        manifest was read: not validated again), else one built from keyword
        ``hyperparameters`` (the public constructor, ``DQN(obs_space, act_space, lr=...)``)."""
        if spec is None:
            return cls.validate_hyperparameters(hyperparameters)
        if hyperparameters:
            raise TypeError(f"{cls.algo} takes spec= or hyperparameters as keywords, not both "
                            f"(got spec and {', '.join(map(repr, sorted(hyperparameters)))})")
        expected = cls.spec_class()
        if not isinstance(spec, expected):
            raise TypeError(f"{cls.algo} takes a {expected.__name__} as spec=, got "
                            f"{type(spec).__name__}")
        return spec.model_copy(deep=True)

    @classmethod
    def mutable_hyperparameters(cls) -> tuple[str, ...]:
        """Hyperparameters ``rl_hp_selection`` may name (numeric, read by the maths)."""
        return tuple(n for n in cls.hyperparameter_names if n not in cls.fixed_hyperparameters)

    def _check_hp_config(self) -> None:
        allowed = self.mutable_hyperparameters()
        unknown = sorted(n for n in self.hp_config if n not in allowed)
        if unknown:
            raise ValueError(
                f"rl_hp_selection names {', '.join(map(repr, unknown))}, which "
                f"{self.algo} cannot mutate; mutable hyperparameters: {', '.join(allowed)}"
            )

    @property
    def hyperparameters(self) -> dict[str, JsonScalar]:
        """Current values of the hyperparameters the maths reads (mutation may change them)."""
        return {name: getattr(self, name) for name in self.hyperparameter_names}

    def set_hyperparameter(self, name: str, value: float) -> None:
        """Set one hyperparameter; learning rates are pushed into the optimizer groups."""
        if name not in self.hyperparameter_names:
            raise KeyError(f"{self.algo} has no mutable hyperparameter {name!r}")
        current = getattr(self, name)
        if isinstance(current, bool):
            value = bool(value)
        elif isinstance(current, int):
            value = int(round(value))
        else:
            value = float(value)
        setattr(self, name, value)
        if name in self.lr_names:
            for group in self._lr_param_groups(name):
                group["lr"] = value

    def set_progress(self, progress: float) -> None:
        """Where this member stands in the run's budget (0 at the start, 1 at the end) before
        its next update. With an ``anneal_lr`` hyperparameter set (PPO, IPPO) the optimizers
        that ``lr`` drives take ``lr * (1 - progress)``; ``lr`` itself (what mutation
        changes) is never touched. Otherwise nothing changes."""
        if not getattr(self, "anneal_lr", False):
            return
        lr = self.hyperparameters["lr"]
        assert isinstance(lr, int | float)  # a spec's lr is a number, and mutation keeps it one
        scaled = float(lr) * max(0.0, 1.0 - float(progress))
        for group in self._lr_param_groups("lr"):
            group["lr"] = scaled

    def _lr_param_groups(self, lr_name: str) -> Iterable[dict[str, object]]:
        """The optimizer parameter groups the learning rate ``lr_name`` drives."""
        raise NotImplementedError

    @classmethod
    def settings_not_honoured(cls, spec: AlgoSpec) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """``(refused, ignored)``: the ``(field, reason)`` pairs of ``spec`` set to a
        non-default value in :attr:`unsupported_settings` / :attr:`inert_settings`."""
        fields = type(spec).model_fields

        def changed(name: str) -> bool:
            if name not in fields:
                return False
            value = getattr(spec, name, None)
            default = fields[name].get_default(call_default_factory=True)
            return value is not None and value != default

        # Members are built, mutated and checkpointed from the network section, so a module
        # handed in from Python is refused rather than dropped without a word.
        refused = [(n, _CUSTOM_NETWORK) for n in CUSTOM_NETWORK_FIELDS if changed(n)]
        refused += [(n, why) for n, why in cls.unsupported_settings.items() if changed(n)]
        ignored = [(n, why) for n, why in cls.inert_settings.items() if changed(n)]
        return refused, ignored
