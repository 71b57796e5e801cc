"""Codegen writes every per-algorithm module and list of algorithm names, under --check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from schema_agreement import REPO

from codegen.generate import outputs

_COPIED = ("schemas", "codegen", "agilerl/models/_generated", "agilerl/models/algorithms",
           "agilerl/arena/models/_generated", "agilerl/schemas", "docs/reference")


def _copy_repo(tmp_path: Path) -> Path:
    for rel in _COPIED:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-r", str(REPO / rel), str(tmp_path / rel)], check=True)
    return tmp_path


def _codegen(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codegen", *args, "--repo", str(repo)],
                          cwd=REPO, capture_output=True, text=True)


def test_every_algorithm_spec_module_and_name_list_is_generated() -> None:
    from agilerl.models._generated import REGISTRY

    files = outputs(REPO)
    modules = sorted(p for p in files if p.startswith("agilerl/models/algorithms/")
                     and not p.endswith("__init__.py"))
    schemas = [p for p in (REPO / "schemas" / "algorithms").glob("*.schema.json")
               if "x-agilerl" in json.loads(p.read_text())]
    assert len(modules) == len(REGISTRY) == len(schemas)
    assert "agilerl/models/algorithms/rainbow_dqn.py" in modules
    assert "agilerl/models/algorithms/__init__.py" in files
    assert "agilerl/arena/models/_generated/algorithm_specs.py" in files


def test_name_lists_follow_the_schemas() -> None:
    import agilerl.arena.models as arena
    import agilerl.models as models
    import agilerl.models.algorithms as algorithms
    from agilerl.arena.models._generated import REGISTRY as ARENA_REGISTRY
    from agilerl.models._generated import REGISTRY

    specs = {f"{name}Spec" for name in REGISTRY}
    assert set(algorithms.__all__) == specs
    assert specs <= set(models.__all__)
    arena_specs = {f"{name}Spec" for name in ARENA_REGISTRY}
    assert arena_specs <= set(arena.__all__)
    assert not (specs - arena_specs) & set(arena.__all__)  # non-eligible ones stay out
    for name in specs:
        assert getattr(models, name).__name__ == name


def test_a_new_algorithm_schema_is_picked_up_everywhere(tmp_path: Path) -> None:
    repo = _copy_repo(tmp_path)
    schema = json.loads((repo / "schemas/algorithms/td3.schema.json").read_text())
    schema["title"] = "FakeAlgoSpec"
    schema["$id"] = schema["$id"].replace("td3", "fake_algo")
    schema["properties"]["name"]["const"] = "FakeAlgo"
    schema["properties"]["name"]["default"] = "FakeAlgo"
    schema["properties"]["name"]["examples"] = ["FakeAlgo"]
    (repo / "schemas/algorithms/fake_algo.schema.json").write_text(json.dumps(schema))
    assert _codegen(repo, "--check").returncode == 1  # the new algorithm is missing
    assert _codegen(repo).returncode == 0
    module = (repo / "agilerl/models/algorithms/fake_algo.py").read_text()
    assert "class FakeAlgoSpec(gen.FakeAlgoSpec, RLAlgorithmSpec)" in module
    init = (repo / "agilerl/models/algorithms/__init__.py").read_text()
    assert '"FakeAlgoSpec": "fake_algo"' in init
    registry = (repo / "agilerl/models/_generated/registry.py").read_text()
    assert "name='FakeAlgo'" in registry and "module='fake_algo'" in registry
    assert "FakeAlgoSpec" in (repo / "agilerl/arena/models/_generated/algorithm_specs.py").read_text()
    assert _codegen(repo, "--check").returncode == 0


def test_check_flags_a_hand_added_or_edited_algorithm_module(tmp_path: Path) -> None:
    repo = _copy_repo(tmp_path)
    (repo / "agilerl/models/algorithms/handmade.py").write_text("X = 1\n")
    edited = repo / "agilerl/models/algorithms/dqn.py"
    edited.write_text(edited.read_text() + "# edited\n")
    run = _codegen(repo, "--check")
    assert run.returncode == 1
    assert "unexpected: agilerl/models/algorithms/handmade.py" in run.stderr
    assert "stale: agilerl/models/algorithms/dqn.py" in run.stderr


def test_a_hyperparameter_that_is_not_a_field_stops_generation(tmp_path: Path) -> None:
    repo = _copy_repo(tmp_path)
    path = repo / "schemas/algorithms/dqn.schema.json"
    schema = json.loads(path.read_text())
    schema["x-agilerl"]["hyperparameters"].append("learning_rate")
    path.write_text(json.dumps(schema))
    run = _codegen(repo)
    assert run.returncode != 0
    assert "DQNSpec: x-agilerl.hyperparameters names ['learning_rate']" in run.stderr
    schema["x-agilerl"]["hyperparameters"].pop()
    schema["x-agilerl"]["fixed_hyperparameters"] = ["cudagraphs"]  # a field, not a hyperparameter
    path.write_text(json.dumps(schema))
    run = _codegen(repo)
    assert run.returncode != 0 and "not among its hyperparameters" in run.stderr


def test_an_implementation_gets_its_hyperparameter_names_from_the_schema() -> None:
    from gymnasium import spaces

    from agilerl.algorithms import DQN, TD3

    box = spaces.Box(-1.0, 1.0, (3,))
    for agent, module in ((DQN(box, spaces.Discrete(2), seed=0), "dqn"),
                          (TD3(box, spaces.Box(-1.0, 1.0, (1,)), seed=0), "td3")):
        listed = json.loads((REPO / f"schemas/algorithms/{module}.schema.json").read_text())
        assert agent.hyperparameter_names == tuple(listed["x-agilerl"]["hyperparameters"])
        assert agent.fixed_hyperparameters == tuple(
            listed["x-agilerl"]["fixed_hyperparameters"])
        assert list(agent.hyperparameters) == listed["x-agilerl"]["hyperparameters"]
