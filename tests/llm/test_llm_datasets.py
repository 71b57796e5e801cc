"""Local dataset loading for LLM environments (``agilerl.llm.datasets``): every file format,
folders, hub ids that cannot be reached, column checks and the train/test split."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")

from agilerl.llm import datasets as llm_datasets  # noqa: E402
from agilerl.llm.datasets import DatasetSourceError  # noqa: E402
from agilerl.models import LLMEnvSpec  # noqa: E402

ROWS = [{"prompt": f"p{i}", "chosen": f"c{i}", "rejected": f"r{i}"} for i in range(10)]


def _write(path: Path) -> Path:
    suffix = path.suffix
    if suffix in (".parquet", ".pq"):
        datasets.Dataset.from_list(ROWS).to_parquet(str(path))
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    elif suffix == ".json":
        path.write_text(json.dumps(ROWS))
    elif suffix == ".csv":
        path.write_text("prompt,chosen,rejected\n" + "".join(
            f"{r['prompt']},{r['chosen']},{r['rejected']}\n" for r in ROWS))
    return path


@pytest.mark.parametrize("name", ["d.parquet", "d.pq", "d.jsonl", "d.json", "d.csv"])
def test_every_local_file_format_loads_the_same_rows(tmp_path: Path, name: str) -> None:
    data = llm_datasets.load_dataset_source(str(_write(tmp_path / name)))
    assert data.column_names == ["prompt", "chosen", "rejected"]
    assert data.to_list() == ROWS


def test_relative_path_resolves_against_the_manifest_folder(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "data").mkdir()
    _write(tmp_path / "data" / "prefs.parquet")
    monkeypatch.chdir(tmp_path.parent)  # the file is not under the working directory
    data = llm_datasets.load_dataset_source("data/prefs.parquet", base_dir=tmp_path)
    assert len(data) == len(ROWS)


def test_saved_dataset_folder_and_data_file_folder_load(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS)}).save_to_disk(str(saved))
    assert llm_datasets.load_dataset_source(str(saved)).to_list() == ROWS
    files = tmp_path / "files"
    files.mkdir()
    _write(files / "train.jsonl")
    assert llm_datasets.load_dataset_source(str(files)).to_list() == ROWS


def test_missing_local_file_names_it_and_where_it_was_looked_for(tmp_path: Path) -> None:
    with pytest.raises(DatasetSourceError, match=r"file 'nope\.parquet' not found .*looked in"):
        llm_datasets.load_dataset_source("nope.parquet", base_dir=tmp_path)


def test_unsupported_suffix_is_refused_with_the_supported_list(tmp_path: Path) -> None:
    path = tmp_path / "rows.xlsx"
    path.write_text("x")
    with pytest.raises(DatasetSourceError, match=r"unsupported file type '\.xlsx'.*\.parquet"):
        llm_datasets.load_dataset_source(str(path))


def test_malformed_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text("{not json\n")
    with pytest.raises(DatasetSourceError, match="broken.jsonl' could not be read as json"):
        llm_datasets.load_dataset_source(str(path))


def test_unreachable_hub_id_fails_fast_saying_nothing_can_download(monkeypatch) -> None:
    monkeypatch.setattr(llm_datasets, "hub_reachable", lambda *a, **k: False)
    start = time.monotonic()
    with pytest.raises(DatasetSourceError) as info:
        llm_datasets.load_dataset_source("HumanLLMs/Human-Like-DPO-Dataset")
    message = str(info.value)
    assert "not reachable" in message and "nothing can be downloaded" in message
    assert "environment.dataset=" in message and ".parquet" in message
    assert time.monotonic() - start < 10  # cache-only look-up, no network retries


def test_offline_hub_setting_is_restored_after_a_failed_lookup(monkeypatch) -> None:
    import datasets.config
    from huggingface_hub import constants

    before = (datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE)
    monkeypatch.setattr(llm_datasets, "hub_reachable", lambda *a, **k: False)
    with pytest.raises(DatasetSourceError):
        llm_datasets.load_dataset_source("someone/some-dataset")
    assert before == (datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE)


def test_missing_column_error_names_the_column_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps({"prompt": "p", "answer": "a"}) + "\n")
    data = llm_datasets.load_dataset_source(str(path))
    with pytest.raises(DatasetSourceError, match=r"dataset '.*sft\.jsonl' has no column "
                                                 r"'response', which an SFT environment needs"):
        llm_datasets.require_columns(data, ["prompt", "response"], str(path), "an SFT environment")


def test_columns_renames_apply_and_a_missing_old_name_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.parquet")
    data = llm_datasets.load_dataset_source(str(path))
    renamed = llm_datasets.rename_columns(data, {"chosen": "response"}, str(path))
    assert "response" in renamed.column_names and "chosen" not in renamed.column_names
    with pytest.raises(DatasetSourceError, match="renames column 'question'.*its columns: prompt"):
        llm_datasets.rename_columns(data, {"question": "prompt"}, str(path))


def test_split_is_seeded_disjoint_and_complete() -> None:
    data = datasets.Dataset.from_list(ROWS)
    train, test = llm_datasets.split_dataset(data, 0.8, seed=3)
    assert (len(train), len(test)) == (8, 2)
    assert sorted(list(train["prompt"]) + list(test["prompt"])) == \
        sorted(r["prompt"] for r in ROWS)
    again, _ = llm_datasets.split_dataset(data, 0.8, seed=3)
    assert list(again["prompt"]) == list(train["prompt"])
    other, _ = llm_datasets.split_dataset(data, 0.8, seed=4)
    assert list(other["prompt"]) != list(train["prompt"])


@pytest.mark.parametrize("fraction, what", [(1.0, "no held-out"), (0.0, "no training")])
def test_split_leaving_a_part_empty_is_refused(fraction: float, what: str) -> None:
    data = datasets.Dataset.from_list(ROWS)
    with pytest.raises(DatasetSourceError, match=f"train_test_split = {fraction} leaves {what}"):
        llm_datasets.split_dataset(data, fraction, seed=0)


def test_load_llm_dataset_from_an_env_spec(tmp_path: Path) -> None:
    path = _write(tmp_path / "prefs.csv")
    spec = LLMEnvSpec(env_type="sft", dataset=str(path), columns={"chosen": "response"},
                      train_test_split=0.7, seed=1)
    split = llm_datasets.load_llm_dataset(spec, ["prompt", "response"], "an SFT environment")
    assert (len(split.train), len(split.test)) == (7, 3)
    assert "response" in split.train.column_names and split.source == str(path)


def test_hub_probe_is_false_at_once_in_offline_mode(monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    start = time.monotonic()
    assert llm_datasets.hub_reachable() is False
    assert time.monotonic() - start < 0.5


@pytest.mark.parametrize("name", ["prefs.jsonl", "prefs.csv", "prefs.json", "prefs.parquet"])
def test_validate_names_a_missing_local_dataset_file(tmp_path: Path, name: str) -> None:
    from agilerl.models.validation import validate_path

    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"algorithm:\n  name: DPO\nenvironment:\n  dataset: {name}\n"
                        "network:\n  pretrained_model_name_or_path: some/model\n")
    errors = [(i.path, i.message) for i in validate_path(manifest).errors]
    assert any("dataset" in str(path) and f"file '{name}' not found" in message
               for path, message in errors), errors
    _write(tmp_path / name)
    assert not [e for e in validate_path(manifest).errors if "dataset" in str(e.path)]


def test_reading_a_dataset_shows_no_progress_bar_and_keeps_the_setting(
        tmp_path: Path, capsys) -> None:
    datasets.enable_progress_bars()
    llm_datasets.load_dataset_source(str(_write(tmp_path / "quiet.jsonl")))
    assert "examples" not in capsys.readouterr().err
    assert datasets.is_progress_bar_enabled()
