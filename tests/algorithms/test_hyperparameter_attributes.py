"""A hyperparameter's name and type are stated once, in its schema: every algorithm class
inherits the attribute annotations generated from it
(``agilerl.models._generated.hyperparameter_attributes``) and annotates none by hand."""

from __future__ import annotations

import functools
import operator
import types
import typing
from typing import Annotated, Union, get_args, get_origin

import pytest

from agilerl.algorithms.core.registry import algorithm_class, implemented
from agilerl.models._generated import hyperparameter_attributes as generated

ALGORITHMS = implemented()

#: (hand-written class, attribute) -> why it annotates a hyperparameter itself: shared code
#: reads it, and no base spec of the algorithms using that code lists it.
HAND_ANNOTATED = {
    ("SoftTargetUpdate", "tau"): "the soft-update mixin reads it (DQN, RainbowDQN)",
    ("LLMAlgorithm", "beta"): "read by the policy-gradient update; SFT has no beta",
    ("LLMAlgorithm", "temperature"): "read by generation; SFT and DPO do not sample",
    ("MADDPG", "policy_freq"): "a constant of MADDPG, a hyperparameter of MATD3 only",
}


def _attributes(name: str) -> type:
    return getattr(generated, f"{name}HyperparameterAttributes")


def _plain(annotation: object) -> object:
    """A spec field's type without its constraints (``Annotated`` metadata)."""
    if get_origin(annotation) is Annotated:
        return _plain(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        return functools.reduce(operator.or_, map(_plain, get_args(annotation)))
    return annotation


@pytest.mark.parametrize("name", ALGORITHMS)
def test_the_generated_class_annotates_exactly_the_hyperparameters(name: str) -> None:
    cls = algorithm_class(name)
    attributes = _attributes(name)
    assert issubclass(cls, attributes)
    assert tuple(attributes.__annotations__) == cls.hyperparameter_names


@pytest.mark.parametrize("name", ALGORITHMS)
def test_each_attribute_has_the_type_its_spec_field_validates(name: str) -> None:
    fields = algorithm_class(name).spec_class().model_fields
    hints = typing.get_type_hints(_attributes(name))
    assert {n: _plain(fields[n].annotation) for n in hints} == hints


@pytest.mark.parametrize("name", ALGORITHMS)
def test_no_algorithm_class_annotates_a_hyperparameter_by_hand(name: str) -> None:
    cls = algorithm_class(name)
    by_hand = {(klass.__name__, attr) for klass in cls.__mro__
               if klass.__module__.startswith("agilerl.algorithms.")
               for attr in klass.__dict__.get("__annotations__", {})
               if attr in cls.hyperparameter_names}
    assert by_hand <= set(HAND_ANNOTATED)
    assert set(cls.__dict__.get("__annotations__", {})).isdisjoint(cls.hyperparameter_names)


def test_every_hand_annotation_allowed_still_exists() -> None:
    found = {(klass.__name__, attr) for name in ALGORITHMS
             for klass in algorithm_class(name).__mro__
             for attr in klass.__dict__.get("__annotations__", {})}
    assert set(HAND_ANNOTATED) <= found
