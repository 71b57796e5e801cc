"""Section specs and their rules (spec §8.2, §8.7 #101): networks, training, selection,
mutation, algorithms."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import agilerl.models as models
from agilerl.models import (
    CnnSpec,
    GRPOSpec,
    LLMPPOSpec,
    LLMREINFORCESpec,
    LstmSpec,
    MlpSpec,
    MultiFrequencySelectionSpec,
    MultiInputSpec,
    MutationSpec,
    NetworkSpec,
    RainbowDQNSpec,
    SimbaSpec,
    TournamentSelectionSpec,
    TrainingSpec,
)
from agilerl.models.networks import normalise_network

HEAD = {"hidden_size": [32]}


def test_normaliser() -> None:
    assert normalise_network([1, 2]) == [1, 2]
    assert normalise_network({"arch": "mlp"}) == {"encoder_config": {"arch": "mlp"}}
    raw = {"encoder_config": {"hidden_size": [8]}}
    assert normalise_network(raw) is raw
    both = normalise_network({"arch": "mlp", "encoder_config": {"arch": "cnn"}})
    assert both["encoder_config"]["arch"] == "cnn"


@pytest.mark.parametrize("kwargs,message", [
    ({"hidden_size": [32], "min_hidden_layers": 4, "max_hidden_layers": 2}, "must be less than or equal to"),
    ({"hidden_size": [32] * 7}, "number of hidden layers"),
    ({"hidden_size": [4]}, "min_mlp_nodes"),
    ({"hidden_size": [32], "min_mlp_nodes": 64, "max_mlp_nodes": 16}, "must be less than or equal to"),
])
def test_mlp_rules(kwargs: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        MlpSpec(**kwargs)


def test_cnn_and_simba_rules() -> None:
    with pytest.raises(ValidationError, match="hidden_layers must be between"):
        CnnSpec(channel_size=[8] * 7, kernel_size=[3] * 7, stride_size=[1] * 7)
    with pytest.raises(ValidationError, match="must have the same length"):
        CnnSpec(channel_size=[8, 8], kernel_size=[3], stride_size=[1, 1])
    with pytest.raises(ValidationError, match="num_blocks must be between"):
        SimbaSpec(hidden_size=64, num_blocks=9)
    with pytest.raises(ValidationError,
                       match="hidden_size must be less than or equal to max_mlp_nodes"):
        SimbaSpec(hidden_size=1024, num_blocks=2)


@pytest.mark.parametrize("build", [
    lambda: NetworkSpec(latent_dim=500, encoder_config={"arch": "mlp", "hidden_size": [32]},
                        head_config=HEAD),
    lambda: LstmSpec(hidden_state_size=1000),
    lambda: LstmSpec(hidden_state_size=32, num_layers=9),
    lambda: MultiInputSpec(latent_dim=500),
])
def test_upper_bounds(build) -> None:
    with pytest.raises(ValidationError, match="must be between"):
        build()


def test_simba_encoder_forces_the_flag() -> None:
    net = NetworkSpec(encoder_config={"arch": "simba", "hidden_size": 64, "num_blocks": 2},
                      head_config=HEAD)
    assert net.simba is True and isinstance(net.encoder_config, SimbaSpec)


def test_training_rules() -> None:
    with pytest.raises(ValidationError, match="eval_steps must be greater than evaluation_interval"):
        TrainingSpec(eval_steps=5, evaluation_interval=10)
    assert TrainingSpec(max_wall_seconds=3600).max_wall_seconds == 3600
    assert TrainingSpec().max_wall_seconds is None
    with pytest.raises(ValidationError, match="greater than"):
        TrainingSpec(max_wall_seconds=0)
    with pytest.raises(ValidationError, match="evo_steps"):
        TrainingSpec(max_steps=10, evo_steps=20)
    with pytest.raises(ValidationError, match="eps_start"):
        TrainingSpec(eps_start=0.1, eps_end=0.5)
    TrainingSpec(eval_steps=11, max_steps=100, evo_steps=100, eps_start=0.5, eps_end=0.5)


def test_tournament_size_bounds() -> None:
    # A tournament of one picks an agent at random; the reference library accepts it.
    assert TournamentSelectionSpec(tournament_size=1).tournament_size == 1
    with pytest.raises(ValidationError):
        TournamentSelectionSpec(tournament_size=0)


def test_tournament_larger_than_the_population_warns(tmp_path) -> None:
    from agilerl.models.validation import validate_path

    file = tmp_path / "m.yaml"
    file.write_text("algorithm:\n  name: DQN\nenvironment:\n  name: CartPole-v1\n"
                    "training:\n  pop_size: 3\nselection_strategy:\n  tournament_size: 5\n")
    report = validate_path(file)
    assert report.ok
    [warning] = [w for w in report.warnings if w.path == "selection_strategy.tournament_size"]
    assert "exceeds training.pop_size (3)" in warning.message
    assert warning.location is not None and warning.location.line == 8


@pytest.mark.parametrize("cls", [GRPOSpec, LLMPPOSpec, LLMREINFORCESpec])
def test_vllm_needs_a_config(cls) -> None:
    extra = {"group_size": 2} if cls is GRPOSpec else {}
    with pytest.raises(ValidationError, match="VLLM config is not set"):
        cls(use_vllm=True, **extra)
    assert cls(use_vllm=True, vllm_config={"gpu_memory_utilization": 0.5}, **extra).use_vllm


def test_rainbow_support_rule() -> None:
    with pytest.raises(ValidationError, match="v_min must be less than v_max"):
        RainbowDQNSpec(v_min=5, v_max=5)


def test_mutation_spec_is_closed() -> None:
    with pytest.raises(ValidationError):
        MutationSpec.model_validate({"no_mutation": 0.5})
    spec = MutationSpec.model_validate({"probabilities": {"no_mut": 0.5}})
    assert spec.probabilities.no_mut == 0.5 and spec.probabilities.arch_mut == 0.2


def test_multi_frequency_defaults_and_ratio_rules() -> None:
    default = MultiFrequencySelectionSpec()
    assert default.n_subpopulations == 2 and default.evolution_frequency_ratios == [1, 5]
    assert default.n_winners is None and default.n_losers is None
    assert MultiFrequencySelectionSpec(n_subpopulations=4).evolution_frequency_ratios == [1, 5, 10, 15]
    for ratios, message in (([1, 5, 10], "length 3; it needs one entry per subpopulation"), ([5, 1], "strictly increasing")):
        with pytest.raises(ValidationError, match=message):
            MultiFrequencySelectionSpec(evolution_frequency_ratios=ratios)
    with pytest.raises(ValidationError):
        MultiFrequencySelectionSpec(evolution_frequency_ratios=[0, 5])
    with pytest.raises(ValidationError):
        MultiFrequencySelectionSpec.model_validate({"strategy": "multi_frequency",
                                                    "n_individuals_per_subpopulation": 4})
    with pytest.raises(ValidationError):
        MultiFrequencySelectionSpec.model_validate({"strategy": "multi_frequency",
                                                    "tournament_size": 2})


@pytest.mark.parametrize("pop,subpops,expected", [
    (16, 2, (2, 0, 2, 4)), (6, 2, (1, 0, 1, 1)), (9, 3, (1, 0, 1, 1)), (12, 4, (1, 0, 1, 1)),
])
def test_multi_frequency_layouts(pop: int, subpops: int, expected: tuple) -> None:
    spec = MultiFrequencySelectionSpec(n_subpopulations=subpops)
    layout = spec.resolve_layout(pop)
    got = (layout.n_winners, layout.n_survivors, layout.n_open_for_migration, layout.n_losers)
    assert got == expected
    assert (spec.n_winners, spec.n_losers) == (expected[0], expected[3])  # written back
    assert [spec.subpopulation_of(i, pop) for i in range(pop)] == [i // (pop // subpops) for i in range(pop)]


@pytest.mark.parametrize("pop,given,kwargs,message", [
    (8, False, {}, "pop_size is required"),
    (4, True, {}, "population_size must be >= 6"),
    (10, True, {"n_subpopulations": 3}, "divisible by n_subpopulations"),
    (16, True, {"n_winners": 2, "n_survivors": 2, "n_open_for_migration": 2, "n_losers": 4},
     "must equal population_size // n_subpopulations"),
    (8, True, {"n_winners": 2, "n_survivors": 1, "n_open_for_migration": 2}, "n_losers must be >= 1, got -1"),
])
def test_multi_frequency_layout_errors(pop, given, kwargs, message) -> None:
    spec = MultiFrequencySelectionSpec(**kwargs)
    with pytest.raises(ValueError, match=message):
        spec.resolve_layout(pop, given)


def test_selection_union_defaults_to_tournament() -> None:
    from pydantic import TypeAdapter

    adapter = TypeAdapter(models.SelectionStrategySpec)
    assert isinstance(adapter.validate_python({"tournament_size": 3}), TournamentSelectionSpec)
    assert isinstance(adapter.validate_python({"strategy": "multi_frequency"}),
                      MultiFrequencySelectionSpec)
    with pytest.raises(ValidationError):
        adapter.validate_python({"strategy": "bogus"})
