"""Codegen output is current, complete, light, and agrees with the bundled JSON Schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from schema_agreement import REPO, pydantic_valid

from agilerl.models import _generated as g
from codegen.catalog import load
from codegen.generate import outputs

PEER = REPO.parent / "shared" / "peer-manifests"
PEER_FILES = sorted(PEER.glob("**/*.yaml")) if PEER.is_dir() else []


def test_committed_output_matches_fresh_generation() -> None:
    fresh = outputs(REPO)
    stale = [rel for rel, text in fresh.items()
             if not (REPO / rel).exists() or (REPO / rel).read_text(encoding="utf-8") != text]
    assert stale == [], f"run `make generate`; stale: {stale}"


def test_check_mode_exits_nonzero_on_drift(tmp_path: Path) -> None:
    # A copy of the repository's inputs and committed output with one generated file edited
    # must fail --check.
    for rel in ("schemas", "codegen", "agilerl/models/_generated", "agilerl/models/algorithms",
                "agilerl/arena/models/_generated", "agilerl/schemas", "docs/reference"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-r", str(REPO / rel), str(tmp_path / rel)], check=True)
    target = tmp_path / "agilerl/models/_generated/models.py"
    target.write_text(target.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "codegen", "--check", "--repo", str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 1
    assert "stale: agilerl/models/_generated/models.py" in run.stderr


@pytest.mark.skipif(not PEER_FILES, reason="shared/peer-manifests not available")
@pytest.mark.parametrize("path", PEER_FILES, ids=lambda p: p.relative_to(PEER).as_posix())
def test_peer_manifest_validates_with_jsonschema_and_pydantic(path: Path, validator: Any) -> None:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    assert errors == []
    assert pydantic_valid(doc)


def test_peer_manifest_count() -> None:
    if not PEER_FILES:
        pytest.skip("shared/peer-manifests not available")
    assert len(PEER_FILES) == 51


@pytest.mark.parametrize("package", ["agilerl.arena.models._generated",
                                     "agilerl.models._generated"])
def test_generated_packages_import_without_torch_or_gymnasium(package: str) -> None:
    code = (f"import sys, {package} as m; m.REGISTRY; "
            "bad = sorted(n for n in ('torch', 'gymnasium') if n in sys.modules); "
            "print(bad); sys.exit(1 if bad else 0)")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def _properties(schema: dict[str, Any]):
    for key, prop in schema.get("properties", {}).items():
        yield key, prop, key in schema.get("required", [])


def test_every_schema_property_is_documented() -> None:
    catalog = load(REPO / "schemas")
    problems = []
    for name, schema in [*catalog.models.items(), ("manifest", catalog.manifest)]:
        assert schema.get("description"), f"{name} has no description"
        for key, prop, required in _properties(schema):
            where = f"{catalog.origin.get(name, 'manifest.schema.json')}: {name}.{key}"
            if not prop.get("description"):
                problems.append(f"{where}: no description")
            if not (required or "default" in prop or prop.get("x-runtime-only")
                    or prop.get("x-optional")):
                problems.append(f"{where}: neither required, defaulted nor x-optional")
            if "examples" not in prop or not isinstance(prop["examples"], list) or (
                    not prop["examples"] and not prop.get("x-runtime-only")):
                problems.append(f"{where}: no examples")
    assert problems == []


# Spec §2.2: name -> (agent_type, off_policy, offline, bandit, network spec, default evo_steps,
# environment kind, arena eligible, env_type)
EXPECTED = {
    "DQN": ("single_agent", True, False, False, "QNetworkSpec", 10000, "gym", True, None),
    "RainbowDQN": ("single_agent", True, False, False, "RainbowQNetworkSpec", 10000, "gym", True, None),
    "DDPG": ("single_agent", True, False, False, "DeterministicActorSpec", 10000, "gym", True, None),
    "TD3": ("single_agent", True, False, False, "DeterministicActorSpec", 10000, "gym", True, None),
    "PPO": ("single_agent", False, False, False, "StochasticActorSpec", 10000, "gym", True, None),
    "CQN": ("offline_agent", True, True, False, "QNetworkSpec", 5000, "offline", False, None),
    "NeuralTS": ("bandit_agent", True, False, True, "QNetworkSpec", 500, "bandit", False, None),
    "NeuralUCB": ("bandit_agent", True, False, True, "QNetworkSpec", 500, "bandit", False, None),
    "IPPO": ("multi_agent", False, False, False, "StochasticActorSpec", 10000, "pettingzoo", True, None),
    "MADDPG": ("multi_agent", True, False, False, "DeterministicActorSpec", 10000, "pettingzoo", True, None),
    "MATD3": ("multi_agent", True, False, False, "DeterministicActorSpec", 10000, "pettingzoo", True, None),
    **{n: ("llm_agent", False, False, False, "FinetuningNetworkSpec", 5, "llm", True, "reasoning")
       for n in ("GRPO", "GSPO", "CISPO", "LLMPPO", "LLMREINFORCE")},
    "DPO": ("llm_agent", False, False, False, "FinetuningNetworkSpec", 5, "llm", True, "preference"),
    "SFT": ("llm_agent", False, False, False, "FinetuningNetworkSpec", 5, "llm", True, "sft"),
}


def test_registry_rows_match_the_spec_table() -> None:
    assert set(g.REGISTRY) == set(EXPECTED)
    for name, entry in g.REGISTRY.items():
        got = (entry.agent_type, entry.off_policy, entry.offline, entry.bandit,
               entry.network_spec.__name__, entry.default_evo_steps, entry.environment,
               entry.arena, entry.env_type)
        assert got == EXPECTED[name], name
        assert entry.spec_class.__name__ == name + "Spec"
        assert entry.spec_class.model_fields["name"].default == name
    env_classes = {"gym": g.GymEnvSpec, "pettingzoo": g.PzEnvSpec, "offline": g.OfflineEnvSpec,
                   "bandit": g.BanditEnvSpec, "llm": g.LLMEnvSpec}
    assert all(e.env_spec is env_classes[e.environment] for e in g.ALGORITHMS)


def test_arena_registry_has_the_eligible_algorithms_and_names_the_others() -> None:
    from agilerl.arena.models import _generated as arena
    from agilerl.arena.models._generated.registry import LOCAL_ONLY

    assert sorted(arena.REGISTRY) == sorted(n for n, row in EXPECTED.items() if row[7])
    assert {n for n, row in EXPECTED.items() if not row[7]} == LOCAL_ONLY
    assert not hasattr(arena, "MultiFrequencySelectionSpec")
    assert "max_wall_seconds" not in arena.TrainingSpec.model_fields
    assert "actor_network" not in arena.DQNSpec.model_fields
    assert "cudagraphs" not in arena.DQNSpec.model_fields
    with pytest.raises(ValueError):
        arena.TournamentSelectionSpec(tournament_size=0)
    with pytest.raises(ValueError):
        g.TournamentSelectionSpec(tournament_size=0)
    cfg = arena.GRPOSpec(group_size=2, vllm_config={"max_num_seqs": 4}).vllm_config
    assert isinstance(cfg, arena.VLLMConfig) and cfg.max_num_seqs == 4


def test_arena_fields_are_a_subset_of_local_fields_with_equal_defaults() -> None:
    from agilerl.arena.models import _generated as arena

    for name in arena.__all__:
        cls = getattr(arena, name)
        if not (isinstance(cls, type) and issubclass(cls, arena.SpecModel)):
            continue
        if name in ("EnvSpec", "VLLMConfig", "CosineLRScheduleConfig"):
            continue
        local = getattr(g, name).model_fields
        for field, info in cls.model_fields.items():
            assert field in local, f"{name}.{field} exists only on Arena"
            if name not in ("CISPOSpec",) and info.default is not None and not info.is_required():
                assert info.default == local[field].default, f"{name}.{field}"


def test_bundle_is_valid_json_schema_and_names_every_algorithm() -> None:
    schema = json.loads((REPO / "agilerl/schemas/manifest.schema.json").read_text())
    names = schema["properties"]["algorithm"]["properties"]["name"]["enum"]
    assert sorted(names) == sorted(EXPECTED)
    assert len(schema["allOf"]) == len(EXPECTED)


def test_every_example_is_valid_for_its_property() -> None:
    schema = json.loads((REPO / "agilerl/schemas/manifest.schema.json").read_text())
    import jsonschema

    bad = []
    for name, model in schema["$defs"].items():
        for key, prop in model.get("properties", {}).items():
            check = jsonschema.Draft202012Validator(
                {"$defs": schema["$defs"], "$ref": f"#/$defs/{name}/properties/{key}"})
            bad += [f"{name}.{key}: {ex!r}" for ex in prop.get("examples", [])
                    if not check.is_valid(ex)]
    assert bad == []


ARENA_RL_PEERS = [p for p in PEER_FILES if "llm_finetuning" not in p.parts and p.name != "sft.yaml"]


@pytest.mark.skipif(not PEER_FILES, reason="shared/peer-manifests not available")
@pytest.mark.parametrize("path", ARENA_RL_PEERS, ids=lambda p: p.relative_to(PEER).as_posix())
def test_peer_rl_manifests_against_the_arena_bundle(path: Path) -> None:
    import jsonschema

    from agilerl.arena.models import _generated as arena

    schema = json.loads((REPO / "agilerl/schemas/arena-manifest.schema.json").read_text())
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    selection = doc.get("selection_strategy") or doc.get("tournament_selection") or {}
    eligible = (doc["algorithm"]["name"] in arena.REGISTRY
                and selection.get("strategy", "tournament") == "tournament")
    assert jsonschema.Draft202012Validator(schema).is_valid(doc) is eligible
    if eligible:
        arena.REGISTRY[doc["algorithm"]["name"]].spec_class.model_validate(doc["algorithm"])
        arena.EnvSpec.model_validate(doc["environment"])
        arena.TrainingSpec.model_validate(doc.get("training", {}))


PUBLIC_NAMES = ["DQNSpec", "RainbowDQNSpec", "DDPGSpec", "TD3Spec", "PPOSpec", "CQNSpec", "NeuralTSSpec", "NeuralUCBSpec", "IPPOSpec", "MADDPGSpec", "MATD3Spec", "GRPOSpec", "GSPOSpec", "CISPOSpec", "LLMPPOSpec", "LLMREINFORCESpec", "DPOSpec", "SFTSpec", "TrainingSpec", "ReplayBufferSpec", "NStepBufferArgs", "PerBufferArgs", "MutationSpec", "MutationProbabilities", "RLHyperparameter", "TournamentSelectionSpec", "MultiFrequencySelectionSpec", "NetworkSpec", "MlpSpec", "CnnSpec", "LstmSpec", "SimbaSpec", "MultiInputSpec", "QNetworkSpec", "RainbowQNetworkSpec", "ContinuousQNetworkSpec", "DeterministicActorSpec", "StochasticActorSpec", "ValueNetworkSpec", "FinetuningNetworkSpec", "LoraConfigDict", "GymEnvSpec", "PzEnvSpec", "OfflineEnvSpec", "BanditEnvSpec", "LLMEnvSpec", "AlgoSpec", "RLAlgorithmSpec", "MultiAgentRLAlgorithmSpec", "LLMAlgorithmSpec"]


def test_public_class_names_and_hierarchy() -> None:
    missing = [n for n in PUBLIC_NAMES if not isinstance(getattr(g, n, None), type)]
    assert missing == []
    assert all(n in g.__all__ for n in PUBLIC_NAMES)
    for name in ("DQNSpec", "PPOSpec", "NeuralTSSpec", "CQNSpec"):
        assert issubclass(getattr(g, name), g.RLAlgorithmSpec)
    for name in ("IPPOSpec", "MADDPGSpec", "MATD3Spec"):
        assert issubclass(getattr(g, name), g.MultiAgentRLAlgorithmSpec)
    for name in ("GRPOSpec", "DPOSpec", "SFTSpec", "LLMPPOSpec"):
        assert issubclass(getattr(g, name), g.LLMAlgorithmSpec)
    assert issubclass(g.StochasticActorSpec, g.NetworkSpec)
    assert issubclass(g.OfflineEnvSpec, g.GymEnvSpec)
    assert all(issubclass(e.spec_class, g.AlgoSpec) for e in g.ALGORITHMS)


def test_runtime_only_fields_take_objects_not_data_and_are_not_dumped() -> None:
    module = object()
    spec = g.DQNSpec(actor_network=module, net_config={"latent_dim": 8})
    assert spec.actor_network is module
    assert "actor_network" not in spec.model_dump() and "net_config" not in spec.model_dump()
    with pytest.raises(ValueError, match="runtime-only"):
        g.DQNSpec(actor_network={"layers": 2})
    assert g.TrainingSpec.model_validate({"population_size": 3}).pop_size == 3
    with pytest.raises(ValueError, match="'population_size' and 'pop_size' are spellings"):
        g.TrainingSpec.model_validate({"population_size": 3, "pop_size": 5})
    assert g.TrainingSpec(metrics_interval=7).model_dump()["evo_steps"] == 7
