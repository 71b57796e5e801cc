"""``agilerl llm tiny-model DIR``: a loadable local model, tokenizer and toy datasets, the
same bytes for the same seed, clear refusals; the built-in multi-turn game; the shipped LLM
manifests and docs/llm.md name the overrides that point them at the folder."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from agilerl.cli.main import main
from agilerl.llm.starter import (
    QUICK_BUDGET,
    QUICK_EXTRA,
    SHIPPED,
    StarterFolderError,
    overrides_for,
    walkthrough,
    write_starter,
)
from agilerl.llm.toy_game import GuessLetter, make_guess_letter

REPO = Path(__file__).resolve().parents[2]
LLM_CONFIGS = REPO / "configs" / "training" / "llm"


@pytest.fixture(scope="module")
def starter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("starter") / "tiny"
    assert main(["llm", "tiny-model", str(folder)]) == 0
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_folder_holds_a_model_that_loads_and_generates_with_its_tokenizer(
        starter: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(starter / "model")
    tokenizer = AutoTokenizer.from_pretrained(starter / "model")
    assert 100_000 < sum(p.numel() for p in model.parameters()) < 1_000_000
    assert tokenizer.pad_token == "<pad>" and tokenizer.eos_token == "<eos>"
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Q42?"}],
                                           add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n")
    ids = tokenizer(prompt, return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=5, do_sample=False,
                         pad_token_id=tokenizer.pad_token_id)
    assert out.shape[1] == ids["input_ids"].shape[1] + 5
    assert tokenizer.decode(ids["input_ids"][0]) == prompt  # character-level: lossless


def test_the_datasets_have_the_columns_the_shipped_manifests_read(starter: Path) -> None:
    rows = {name: [json.loads(line) for line in (starter / f"{name}.jsonl").read_text()
                   .splitlines()] for name in ("countdown", "preference", "sft")}
    assert {len(r) for r in rows.values()} == {64, 48} and len(rows["countdown"]) == 64
    assert set(rows["countdown"][0]) == {"nums", "target", "solution"}
    assert set(rows["preference"][0]) == {"prompt", "chosen", "rejected"}
    assert set(rows["sft"][0]) == {"prompt", "response"}
    sft = rows["sft"][0]
    assert sft["response"] == f" A{sft['prompt'][1:3]}."  # repeats the prompt's number
    assert walkthrough(starter)[0] in (starter / "README.md").read_text()


def test_every_countdown_solution_scores_full_marks_with_the_shipped_reward(
        starter: Path) -> None:
    spec = importlib.util.spec_from_file_location("shipped_reward", LLM_CONFIGS / "reward.py")
    assert spec is not None and spec.loader is not None
    reward = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward)
    for line in (starter / "countdown.jsonl").read_text().splitlines():
        row = json.loads(line)
        question = str(row["nums"])  # the manifests rename nums -> question
        assert reward.countdown_reward(f"<answer>{row['solution']}</answer>", row["target"],
                                       question) == 1.0
        assert reward.countdown_reward("<answer>1 + 1</answer>", row["target"], question) < 1.0


def test_the_same_seed_writes_the_same_bytes_and_another_seed_other_weights(
        starter: Path, tmp_path: Path) -> None:
    first = _files(starter)
    assert main(["llm", "tiny-model", str(starter), "--force"]) == 0  # again, same folder
    assert _files(starter) == first
    write_starter(tmp_path / "seed1", seed=1)
    other = _files(tmp_path / "seed1")
    assert other["model/model.safetensors"] != first["model/model.safetensors"]
    assert other["model/tokenizer.json"] == first["model/tokenizer.json"]


def test_a_non_empty_folder_is_refused_unless_forced(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "busy"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert main(["llm", "tiny-model", str(folder)]) == 1
    err = capsys.readouterr().err
    assert f"agilerl llm tiny-model: {folder} is not empty (1 entry: notes.txt)" in err
    assert "--force" in err and "Traceback" not in err
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    with pytest.raises(StarterFolderError, match="not empty"):
        write_starter(folder)


def test_a_file_or_an_unwritable_path_is_an_error_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "model.bin"
    file.write_text("x")
    assert main(["llm", "tiny-model", str(file), "--force"]) == 1
    assert f"{file} exists and is not a folder" in capsys.readouterr().err
    assert main(["llm", "tiny-model", str(file / "sub")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"agilerl llm tiny-model: cannot write {file / 'sub'}: ")
    assert "Traceback" not in err


def test_usage_errors_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm"]) == 2
    assert "tiny-model" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["llm", "tiny-model", "x", "--seed", "-1"])
    assert stop.value.code == 2
    assert "--seed: must be at least 0" in capsys.readouterr().err


def test_every_shipped_llm_manifest_names_its_overrides_in_its_header() -> None:
    manifests = sorted(p.stem for p in LLM_CONFIGS.glob("*.yaml"))
    assert manifests == sorted(SHIPPED)
    for name, env_type in SHIPPED.items():
        header = "".join(line[1:] for line in (LLM_CONFIGS / f"{name}.yaml").read_text()
                         .splitlines() if line.startswith("#"))
        header = " ".join(header.split())
        assert "agilerl llm tiny-model /tmp/tiny" in header, name
        assert " ".join(overrides_for(env_type, "/tmp/tiny")) in header, name
        quick = " ".join([*QUICK_BUDGET, *QUICK_EXTRA.get(env_type, ())])
        assert quick in header, name


def test_docs_walk_through_the_exact_commands() -> None:
    text = (REPO / "docs" / "llm.md").read_text()
    flat = " ".join(re.sub(r"\\\n", " ", text).split())
    assert "agilerl llm tiny-model /tmp/tiny" in flat
    for command in walkthrough("/tmp/tiny"):
        assert command in flat, command
    assert "configs/llm_finetuning" not in text
    assert "configs/llm_finetuning" not in (REPO / "docs" / "llm_rl.md").read_text()


def test_overrides_of_an_unknown_env_type_are_refused() -> None:
    with pytest.raises(ValueError, match="env_type 'bandit'"):
        overrides_for("bandit", "/tmp/tiny")


# ------------------------------------------------------------------ the multi-turn game
def test_the_guess_letter_game_scores_hints_and_ends() -> None:
    game = make_guess_letter(letters=4, max_turns=3)
    opening, _ = game.reset(seed=5)
    assert opening.startswith("Guess my letter: one of a, b, c, d")
    secret = game.secret
    assert secret in "abcd"
    game2 = GuessLetter(letters=4)
    game2.reset(seed=5)
    assert game2.secret == secret  # the seed draws the secret
    assert game.step("xyz 123") == ("Reply with one of a, b, c, d.", -0.1, False, False, {})
    wrong = "a" if secret != "a" else "d"
    obs, reward, terminated, truncated, _ = game.step(f"I think {wrong}")
    where = "after" if secret > wrong else "before"
    assert (obs, reward, terminated, truncated) == (f"No, it comes {where} {wrong}.", 0.0,
                                                    False, False)
    assert game.step(secret.upper()) == ("Right!", 1.0, True, False, {})
    game.reset(seed=5)
    for _ in range(2):
        assert not game.step("?")[3]
    assert game.step("?")[3]  # the third reply without a right guess truncates
    with pytest.raises(ValueError, match="env_config.letters"):
        GuessLetter(letters=1)
    with pytest.raises(ValueError, match="env_config.max_turns"):
        GuessLetter(max_turns=0)


def test_a_game_whose_opening_does_not_fit_the_context_is_refused(starter: Path) -> None:
    import yaml

    from agilerl.core.errors import EnvironmentSetupError
    from agilerl.training.trainer import LocalTrainer

    manifest = yaml.safe_load((LLM_CONFIGS / "grpo_multiturn.yaml").read_text())
    manifest["network"].update(pretrained_model_name_or_path=str(starter / "model"),
                               max_context_length=40)  # the opening is ~90 characters
    manifest["training"].update(max_steps=1, evo_steps=1)
    trainer = LocalTrainer.from_manifest(manifest, seed=0)
    with pytest.raises(EnvironmentSetupError, match=r"opens with a prompt of \d+ tokens.*"
                       r"network.max_context_length = 40"):
        trainer.train(verbose=False)


def test_without_the_llm_extra_the_command_names_the_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import agilerl.llm
    from agilerl.core.errors import MissingExtraError

    def missing(what: str = "") -> None:
        raise MissingExtraError(f"{what} needs the Python package(s) 'peft'. Install them "
                                "with: pip install 'agilerl[llm]'")

    monkeypatch.setattr(agilerl.llm, "require_llm_extra", missing)
    assert main(["llm", "tiny-model", str(tmp_path / "t")]) == 1
    err = capsys.readouterr().err
    assert "agilerl llm tiny-model: agilerl llm tiny-model needs" in err
    assert "pip install 'agilerl[llm]'" in err and not (tmp_path / "t").exists()
