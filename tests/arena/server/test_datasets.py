"""Datasets over real HTTP: CSV upload with a column mapping, per user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agilerl.arena.client import ArenaClient
from agilerl.arena.errors import ArenaAPIError, ArenaConfigError, ArenaValidationError
from agilerl.arena.server.testing import create_token

from .conftest import Api

DATASETS = "/api/cli/v1/datasets"
SFT_CSV = "question,answer,notes\nWhat is 2+2?,4,easy\n\"Name, a colour\",blue,\n"


def test_create_list_exists_delete(server: Any, tmp_path: Path) -> None:
    srv, _ = server
    csv_file = tmp_path / "qa.csv"
    csv_file.write_text(SFT_CSV)
    with ArenaClient(api_key=srv.token, base_url=srv.base_url, verbose=False) as arena:
        made = arena.create_dataset("qa", "SFT", {"prompt": "question", "target": "answer"},
                                    description="two rows", file=csv_file)
        assert made["is_ready"] and made["uploaded"] and made["rows"] == 2
        assert made["columns"] == ["question", "answer", "notes"]
        # a mapping written the other way round (column -> field) is understood too
        pref = arena.create_dataset("pref", "preference",
                                    {"question": "prompt", "answer": "chosen",
                                     "notes": "rejected"}, file=SFT_CSV.encode())
        assert pref["column_mapping"] == {"prompt": "question", "chosen": "answer",
                                          "rejected": "notes"}
        assert [d["name"] for d in arena.list_datasets()] == ["qa", "pref"]
        assert [d["name"] for d in arena.list_datasets(name="pr")] == ["pref"]
        assert arena.dataset_exists("qa") == {"exists": True, "id": made["id"],
                                              "datasetType": "sft"}
        with pytest.raises(ArenaAPIError) as dup:
            arena.create_dataset("qa", "sft", {"prompt": "question", "target": "answer"},
                                 file=csv_file)
        assert dup.value.status_code == 409
        stored = srv.data_dir / "datasets" / "1" / "qa" / "data.csv"
        assert stored.read_text() == SFT_CSV
        arena.delete_dataset("qa")
        assert arena.dataset_exists("qa") == {"exists": False} and not stored.exists()
        with pytest.raises(ArenaAPIError) as gone:
            arena.delete_dataset("qa")
        assert gone.value.status_code == 404
        with pytest.raises(ArenaConfigError, match="category"):
            arena.create_dataset("x", "chat", {}, file=csv_file)


@pytest.mark.parametrize("category, mapping, data, words", [
    ("sft", {"prompt": "question"}, SFT_CSV, "missing target"),
    ("reasoning", {"question": "q", "answer": "answer"}, SFT_CSV, "column(s) q are not in"),
    ("sft", {"prompt": "question", "target": "answer"}, "question,answer\n", "no rows"),
    ("sft", {"prompt": "question", "target": "answer"}, "question,answer\n1,2,3\n",
     "row 2 has 3 fields"),
    ("sft", {"prompt": "question", "target": "answer"}, b"question,answer\n\xff\xfe,1\n",
     "not UTF-8"),
])
def test_bad_datasets_are_refused_naming_the_field(server: Any, category: str,
                                                   mapping: dict[str, str], data: Any,
                                                   words: str) -> None:
    srv, api = server
    with ArenaClient(api_key=srv.token, base_url=srv.base_url, verbose=False) as arena, \
            pytest.raises(ArenaValidationError) as info:
        arena.create_dataset("bad", category, mapping,
                             file=data if isinstance(data, bytes) else data.encode())
    assert info.value.status_code == 422 and words in str(info.value), str(info.value)
    assert api.http.get(DATASETS).json()["data"] == []


def test_hub_imports_and_searches_are_refused_plainly(server: Any) -> None:
    _, api = server
    resp = api.http.post(DATASETS + "/create", data={
        "name": "hub", "category": "sft", "column_mapping": "{}",
        "hf_dataset_name": "org/data"})
    assert resp.status_code == 422 and "Hugging Face" in resp.json()["error"]
    resp = api.http.get(DATASETS, params={"search": "gsm8k"})
    assert resp.status_code == 501 and "Hugging Face" in resp.json()["error"]


def test_user_isolation_for_datasets(server: Any) -> None:
    srv, api = server
    resp = api.http.post(DATASETS + "/create", data={
        "name": "private", "category": "reasoning",
        "column_mapping": json.dumps({"question": "question", "answer": "answer"})},
        files={"file": ("d.csv", SFT_CSV.encode(), "text/csv")})
    assert resp.status_code == 201, resp.text
    bob = Api(srv, create_token(srv.data_dir, "bob"))
    try:
        assert bob.http.get(DATASETS).json()["data"] == []
        assert bob.http.get(DATASETS + "/exists",
                            params={"name": "private"}).json()["data"] == {"exists": False}
        assert bob.http.request("DELETE", DATASETS + "/delete",
                                json={"name": "private"}).status_code == 404
    finally:
        bob.close()
    assert api.http.get(DATASETS + "/exists",
                        params={"name": "private"}).json()["data"]["exists"] is True


def test_cli_datasets_commands(server: Any, tmp_path: Path) -> None:
    srv, _ = server
    (tmp_path / "d.csv").write_text(SFT_CSV)
    (tmp_path / "map.json").write_text('{"question": "question", "answer": "answer"}')
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env.update(HOME=str(tmp_path), **srv.env())

    def arena(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agilerl.arena.cli", *args], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)

    made = arena("datasets", "create", "qa", "--category", "Reasoning", "--column-mapping-file",
                 "map.json", "--file", "d.csv")
    assert made.returncode == 0 and "Created dataset qa (2 rows)" in made.stdout, made.stderr
    listed = arena("datasets", "list", "--json")
    assert [d["name"] for d in json.loads(listed.stdout)] == ["qa"]
    usage = arena("datasets", "create", "qa2", "--category", "sft", "--file", "d.csv")
    assert usage.returncode == 2 and "column-mapping" in usage.stderr
    bad = arena("datasets", "create", "qa2", "--category", "sft", "--column-mapping", "{",
                "--file", "d.csv")
    assert bad.returncode == 1 and "not valid JSON" in bad.stderr and "Traceback" not in bad.stderr
    gone = arena("datasets", "delete", "qa", "--yes")
    assert gone.returncode == 0 and "Deleted dataset qa" in gone.stdout


def test_an_llm_manifest_naming_a_dataset_gets_a_copy_in_its_experiment(server: Any) -> None:
    srv, api = server
    resp = api.http.post(DATASETS + "/create", data={
        "name": "prefs", "category": "preference",
        "column_mapping": json.dumps({"prompt": "question", "chosen": "answer",
                                      "rejected": "notes"})},
        files={"file": ("d.csv", SFT_CSV.encode(), "text/csv")})
    assert resp.status_code == 201, resp.text
    man = {"algorithm": {"name": "DPO", "batch_size": 4},
           "environment": {"name": "prefs"},
           "network": {"pretrained_model_name_or_path": "sshleifer/tiny-gpt2",
                       "max_context_length": 128},
           "training": {"max_steps": 10, "evo_steps": 5, "pop_size": 1}}
    ack = api.submit(man, experiment_name="dpo")
    run = srv.data_dir / "experiments" / str(ack["experiment_id"])
    assert (run / "dataset.csv").read_text() == SFT_CSV
    env = json.loads((run / "manifest.json").read_text())["environment"]
    assert env["dataset"] == "dataset.csv"
    assert env["columns"] == {"question": "prompt", "answer": "chosen", "notes": "rejected"}
    # another user's manifest naming it is left alone (a Hub id, for that user)
    bob = Api(srv, create_token(srv.data_dir, "bob"))
    try:
        other = bob.submit(man, experiment_name="dpo")
    finally:
        bob.close()
    run = srv.data_dir / "experiments" / str(other["experiment_id"])
    assert not (run / "dataset.csv").exists()
    assert json.loads((run / "manifest.json").read_text())["environment"]["name"] == "prefs"
