"""Issue 22 item 1: every run writes ``events.jsonl`` (docs/run-events.md) in its run folder.

A tiny real run's events validate against the schema and agree with the population: each
member after selection has its parent's hyperparameters with its mutation's changes, the
last mutations' new values are what the members hold, fitnesses are metrics.csv's. A
resumed run tells each generation once; two worker processes tell what one does.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agilerl import LocalTrainer
from agilerl.logging.events import EVENTS_FILE, RunEventLog, read_events
from tests.training.conftest import TINY_DQN

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "agilerl" / "schemas" / "run_events.schema.json").read_text())


def _train(manifest: dict, run_dir: Path, seed: int = 5, **options: Any) -> LocalTrainer:
    trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(manifest), seed=seed,
                                         **options.pop("trainer", {}))
    trainer.train(verbose=False, run_dir=run_dir, **options)
    return trainer


def _without_time(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "time"} for e in events]


def _by_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["event"] == kind]


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory) -> tuple[LocalTrainer, Path]:
    manifest = copy.deepcopy(TINY_DQN)
    manifest["mutation"]["probabilities"].update(no_mut=0.1, arch_mut=0.1, params_mut=0.1,
                                                rl_hp_mut=0.5)
    manifest["training"]["pop_size"] = 4
    run_dir = tmp_path_factory.mktemp("events") / "run"
    return _train(manifest, run_dir), run_dir


def test_every_line_validates_against_the_schema_in_order(dqn_run):
    _, run_dir = dqn_run
    validator = jsonschema.Draft202012Validator(SCHEMA)
    lines = (run_dir / EVENTS_FILE).read_text().splitlines()
    events = [json.loads(line) for line in lines]
    for event in events:
        validator.validate(event)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert events[-1]["status"] == "finished" and events[-1]["generations"] == 3
    assert [e["generation"] for e in _by_type(events, "generation")] == [1, 2, 3]
    assert events[0]["pop_size"] == 4 and len(events[0]["members"]) == 4
    assert "actor: encoder [16]" in events[0]["members"][0]["architecture"]
    # the pre-training mutation (generation 0), then one per member after each selection
    mutations = _by_type(events, "mutation")
    assert [(e["generation"], e["member"]) for e in mutations] == \
        [(g, m) for g in (0, 1, 2, 3) for m in range(4)]
    assert {e["kind"] for e in mutations} - {"none"}  # the run did mutate
    assert (run_dir / "plots").exists() is False  # nothing but the log is written here


def test_fitness_and_steps_are_those_of_metrics_csv(dqn_run):
    _, run_dir = dqn_run
    with (run_dir / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    generations = _by_type(read_events(run_dir), "generation")
    assert len(rows) == len(generations)
    for row, event in zip(rows, generations, strict=True):
        assert event["env_steps"] == int(row["train/global_step"])
        for member in event["members"]:
            m = member["member"]
            assert member["fitness"] == pytest.approx(float(row[f"eval/agent_{m}/fitness"]))
            assert member["steps"] == int(row[f"train/agent_{m}/local_steps"])


def _applied(values: dict, mutation: dict) -> dict:
    out = dict(values)
    for change in mutation["changes"]:
        if change["name"] in out:
            assert out[change["name"]] == change["old"]
            out[change["name"]] = change["new"]
    return out


def test_selection_parents_and_mutation_changes_agree_with_the_population(dqn_run):
    trainer, run_dir = dqn_run
    events = read_events(run_dir)
    generations = {e["generation"]: e for e in _by_type(events, "generation")}
    selections = {e["generation"]: e for e in _by_type(events, "selection")}
    mutations = {(e["generation"], e["member"]): e for e in _by_type(events, "mutation")}
    hp = {g: {m["member"]: m["hyperparameters"] for m in e["members"]}
          for g, e in generations.items()}
    copied = 0
    for g in (1, 2):
        for new in selections[g]["members"]:
            m, parent = new["member"], new["parent"]
            copied += parent != m
            # training does not change DQN hyperparameters: the next generation shows the
            # parent's values with the member's mutation applied
            assert hp[g + 1][m] == _applied(hp[g][parent], mutations[(g, m)])
        assert [n["elite"] for n in selections[g]["members"]] == [True, False, False, False]
    assert copied  # selection copied someone over someone else
    final = {m: _applied(hp[3][n["parent"]], mutations[(3, m)])
             for n in selections[3]["members"] for m in [n["member"]]}
    assert final == {m: a.hyperparameters for m, a in enumerate(trainer.population)}
    for (g, m), mutation in mutations.items():  # the last architecture changes hold
        if g == 3 and mutation["kind"] in ("architecture", "new_layer", "activation"):
            for change in mutation["changes"]:
                network, *path = change["name"].split(".")
                value: Any = trainer.population[m].networks[network].architecture()
                for key in path:
                    value = value[key]
                assert value == change["new"]


def test_a_resumed_run_tells_each_generation_once_and_as_the_whole_run(tmp_path, tiny_dqn):
    whole = tmp_path / "whole"
    _train(tiny_dqn, whole)
    part = tmp_path / "part"
    _train(tiny_dqn, part, checkpoint_steps=200)
    first = sorted((part / "checkpoints").iterdir())[0]  # after generation 1 of 3
    _train(tiny_dqn, part, trainer={"resume_from_checkpoint": first})
    events = read_events(part)
    assert [e["generation"] for e in _by_type(events, "generation")] == [1, 2, 3]
    assert [e["generation"] for e in _by_type(events, "selection")] == [1, 2, 3]
    starts = _by_type(events, "run_start")
    assert [(s["resumed"], s["generation"]) for s in starts] == [(False, 0), (True, 1)]
    # the part of the first run up to its checkpoint, then the resumed run, say what the
    # uninterrupted run says (checkpoints and run starts and ends aside)
    story = ("generation", "selection", "mutation")
    assert _without_time([e for e in events if e["event"] in story]) == \
        _without_time([e for e in read_events(whole) if e["event"] in story])
    assert [c["path"] for c in _by_type(events, "checkpoint")][0] == \
        f"checkpoints/{first.name}"


def test_two_worker_processes_tell_what_one_does(tmp_path, tiny_dqn):
    one, two = tmp_path / "one", tmp_path / "two"
    _train(tiny_dqn, one, num_workers=1)
    _train(tiny_dqn, two, num_workers=2)
    assert _without_time(read_events(two)) == _without_time(read_events(one))


def test_no_run_folder_no_events(tmp_path, monkeypatch, tiny_dqn):
    monkeypatch.chdir(tmp_path)
    manifest = copy.deepcopy(tiny_dqn)
    manifest["training"].update(max_steps=200, pop_size=2)
    LocalTrainer.from_manifest(manifest=manifest, seed=1).train(verbose=False, run_dir=False)
    assert list(tmp_path.iterdir()) == []


def test_resume_drops_later_events_and_a_torn_last_line(tmp_path):
    log = RunEventLog(tmp_path)
    log.emit("run_start", generation=0, members=[])
    for g in (1, 2, 3):
        log.emit("generation", generation=g, members=[], env_steps=g * 10)
    log.emit("run_end", status="interrupted", generations=3, env_steps=30)
    log.close()
    with (tmp_path / EVENTS_FILE).open("a") as handle:
        handle.write('{"v": 1, "event": "gener')  # a kill in the middle of a write
    assert len(read_events(tmp_path)) == 5  # readers skip the torn line
    RunEventLog(tmp_path, keep_until_generation=2).close()
    text = (tmp_path / EVENTS_FILE).read_text()
    assert text.endswith("\n")
    assert [(e["event"], e.get("generation")) for e in read_events(tmp_path)] == \
        [("run_start", 0), ("generation", 1), ("generation", 2)]
    RunEventLog(tmp_path).close()  # a new run in the same folder starts a new log
    assert read_events(tmp_path) == []


def test_values_are_written_as_json(tmp_path):
    import numpy as np

    log = RunEventLog(tmp_path)
    log.emit("generation", generation=1, env_steps=np.int64(7),
             members=[{"member": 0, "fitness": float("nan"), "steps": 3,
                       "hyperparameters": {"lr": np.float32(0.5), "double": np.bool_(True),
                                           "sizes": (1, 2)}}])
    log.close()
    (event,) = read_events(tmp_path)
    assert event["env_steps"] == 7
    assert event["members"][0]["fitness"] is None
    assert event["members"][0]["hyperparameters"] == {"lr": 0.5, "double": True,
                                                      "sizes": [1, 2]}


def test_run_end_status_says_how_the_run_stopped():
    from agilerl.core.errors import TrainingAborted
    from agilerl.training.loop import Interrupted, LoopState
    from agilerl.training.run_events import end_status

    assert end_status(LoopState(), None) == "finished"
    assert end_status(LoopState(stopped_early=True), None) == "target_reached"
    assert end_status(LoopState(out_of_time=True), None) == "interrupted"
    assert end_status(LoopState(), Interrupted()) == "interrupted"
    assert end_status(LoopState(), TrainingAborted(2)) == "interrupted"
    assert end_status(LoopState(), RuntimeError("boom")) == "failed"
