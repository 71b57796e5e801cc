"""Bad runtime inputs to ``agilerl train``: damaged checkpoints, resumes into another
manifest, devices that are not there, missing extras, environments that cannot be built,
W&B without a key. Each gets its documented exit status and one clear message: never a
traceback, never "internal error".

The command runs in-process (``agilerl.train.main``), which reports exactly what the
console script prints; one tiny run writes the checkpoints every case damages a copy of.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

from agilerl.checkpoint import read_checkpoint
from agilerl.train import main

from .conftest import TINY_DQN

EXIT_INVALID, EXIT_USAGE = 1, 2


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """A finished tiny DQN run with two checkpoints (generations 1 and 2)."""
    root = tmp_path_factory.mktemp("run")
    manifest = root / "tiny.yaml"
    manifest.write_text(yaml.safe_dump(TINY_DQN, sort_keys=False))
    code = main([str(manifest), "--no-verbose", "--seed", "1", "--run-dir", str(root / "r"),
                 "--checkpoint-steps", "200", "training.max_steps=400",
                 "training.pop_size=2"])
    assert code == 0
    checkpoints = sorted((root / "r" / "checkpoints").iterdir())
    assert len(checkpoints) == 2
    return {"manifest": manifest, "checkpoints": checkpoints, "root": root}


def _train(capsys, *args: object) -> tuple[int, str]:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "internal error" not in err
    return code, err


def _resume(capsys, run: dict, checkpoint: Path, *extra: object) -> tuple[int, str]:
    return _train(capsys, run["manifest"], "--no-verbose", "--run-dir",
                  checkpoint.parent / "out", "training.pop_size=2", *extra,
                  "--resume-from-checkpoint", checkpoint)


def _copy(run: dict, tmp_path: Path, which: int = -1) -> Path:
    target = tmp_path / "ck" / run["checkpoints"][which].name
    shutil.copytree(run["checkpoints"][which], target)
    return target


def _index(folder: Path) -> dict:
    return json.loads((folder / "index.json").read_text())


def _write_index(folder: Path, index: object) -> None:
    (folder / "index.json").write_text(json.dumps(index))


def _edit(change: Callable[[dict], object]) -> Callable[[Path], None]:
    """Damage: apply ``change`` to the parsed index (its return value, if any, replaces it)."""
    def damage(folder: Path) -> None:
        index = _index(folder)
        replaced = change(index)
        _write_index(folder, index if replaced is None else replaced)
    return damage


def _raw(text: bytes) -> Callable[[Path], None]:
    return lambda folder: (folder / "index.json").write_bytes(text)


def _rehash(folder: Path, name: str) -> None:
    index = _index(folder)
    data = (folder / name).read_bytes()
    index["files"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    _write_index(folder, index)


def _replace_file(name: str, content: bytes) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        (folder / name).write_bytes(content)
        _rehash(folder, name)
    return damage


def _replace_trainer_state(folder: Path) -> None:
    torch.save({"seed": 1, "algorithm": "DQN"}, folder / "trainer.pt")  # no loop state
    _rehash(folder, "trainer.pt")


def _trainer_state_with(**changes: object) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        state = torch.load(folder / "trainer.pt", weights_only=False)
        state.update(changes)
        torch.save(state, folder / "trainer.pt")
        _rehash(folder, "trainer.pt")
    return damage


def _trainer_state_is(obj: object) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        torch.save(obj, folder / "trainer.pt")
        _rehash(folder, "trainer.pt")
    return damage


def _pickled(obj: object) -> bytes:
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _set(key: str, value: object) -> Callable[[dict], None]:
    return lambda index: index.__setitem__(key, value)


def _del(key: str, table: str | None = None) -> Callable[[dict], None]:
    def remove(index: dict) -> None:
        (index[table] if table else index).pop(key)
    return remove


def _set_file(name: str, field: str, value: object) -> Callable[[dict], None]:
    return lambda index: index["files"][name].__setitem__(field, value)


def _index_dir(folder: Path) -> None:
    (folder / "index.json").unlink()
    (folder / "index.json").mkdir()


DAMAGED = {
    "index not JSON": (_raw(b"{not json"), "index.json is not readable JSON"),
    "index empty": (_raw(b""), "index.json is not readable JSON"),
    "index binary": (_raw(b"\xff\xfe\x00\x81"), "index.json is not readable JSON"),
    "index deeply nested": (_raw(b"[" * 200_000), "index.json is not readable JSON"),
    "index a list": (_edit(lambda i: [i]), "is a JSON list, not an object"),
    "index a string": (_edit(lambda i: "checkpoint"), "is a JSON str, not an object"),
    "index null": (_raw(b"null"), "is a JSON NoneType, not an object"),
    "index a directory": (_index_dir, "has no index.json"),
    "format missing": (_edit(_del("format")), "is not an agilerl index"),
    "format wrong": (_edit(_set("format", "other-tool")), "is not an agilerl index"),
    "version a string": (_edit(_set("version", "1")), "invalid version '1'"),
    "version from the future": (_edit(_set("version", 99)), "format version 99"),
    "pop_size missing": (_edit(_del("pop_size")), "invalid pop_size None"),
    "pop_size a string": (_edit(_set("pop_size", "2")), "invalid pop_size '2'"),
    "pop_size zero": (_edit(_set("pop_size", 0)), "invalid pop_size 0"),
    "pop_size too large": (_edit(_set("pop_size", 5)), "does not list 'member_2.pt'"),
    "pop_size too small": (_edit(_set("pop_size", 1)), "lists 'member_1.pt' but pop_size is 1"),
    "files missing": (_edit(_del("files")), "has no 'files' table"),
    "files a list": (_edit(_set("files", ["member_0.pt"])), "has no 'files' table"),
    "file entry not an object": (_edit(lambda i: i["files"].__setitem__("member_0.pt", 7)),
                                 "no size and sha256 for 'member_0.pt'"),
    "size negative": (_edit(_set_file("member_0.pt", "size", -1)),
                      "invalid size for 'member_0.pt'"),
    "size a float": (_edit(_set_file("member_0.pt", "size", 1.5)),
                     "invalid size for 'member_0.pt'"),
    "size wrong": (_edit(_set_file("trainer.pt", "size", 12)), "index.json says 12"),
    "sha256 not hex": (_edit(_set_file("member_1.pt", "sha256", "xyz")),
                       "invalid sha256 for 'member_1.pt'"),
    "sha256 wrong": (_edit(_set_file("trainer.pt", "sha256", "0" * 64)), "SHA-256"),
    "file name escapes the folder": (
        _edit(lambda i: i["files"].__setitem__("../../etc/passwd", i["files"]["trainer.pt"])),
        "'../../etc/passwd', which is not a checkpoint file"),
    "trainer state not listed": (_edit(_del("trainer.pt", "files")),
                                 "does not list 'trainer.pt'"),
    "summary not an object": (_edit(_set("summary", [1, 2])), "'summary' that is not an object"),
    "member file missing": (lambda f: (f / "member_1.pt").unlink(), "'member_1.pt' is missing"),
    "member file truncated": (lambda f: (f / "member_0.pt").write_bytes(b"x"),
                              "'member_0.pt' has 1 bytes"),
    "member file flipped": (lambda f: (f / "member_0.pt").write_bytes(
        bytes(b ^ 0xFF for b in (f / "member_0.pt").read_bytes())), "SHA-256"),
    "trainer state not a pickle": (_replace_file("trainer.pt", b"not a pickle at all"),
                                   "'trainer.pt' cannot be loaded"),
    "trainer state incomplete": (_replace_trainer_state, "trainer.pt is not a training state"),
    "trainer state a list": (_trainer_state_is([1, 2]), "trainer.pt is not a training state"),
    "trainer state with a bad RNG state": (_trainer_state_with(rng={"python": 3}),
                                           "loop, evolution or RNG state"),
    "trainer state with a bad evolution state": (_trainer_state_with(evolution=[]),
                                                 "loop, evolution or RNG state"),
    "member state of the wrong shape": (_replace_file("member_1.pt", _pickled({"algo": "DQN"})),
                                        "member_1.pt cannot be restored"),
    "replay buffer of the wrong shape": (_replace_file("replay_buffer.pt", _pickled({})),
                                         "replay_buffer.pt cannot be restored"),
    "member state not an agent": (_replace_file("member_0.pt", b""),
                                  "'member_0.pt' cannot be loaded"),
    "saved manifest not JSON": (_replace_file("manifest.json", b"{oops"),
                                "'manifest.json' is not readable JSON"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_damaged_checkpoint_is_refused_clearly(run, tmp_path, capsys, case):
    damage, needle = DAMAGED[case]
    folder = _copy(run, tmp_path)
    damage(folder)
    code, err = _resume(capsys, run, folder)
    assert code == EXIT_USAGE, err
    assert needle in err


def test_damaged_checkpoint_raises_checkpoint_error_from_python(run, tmp_path):
    from agilerl.checkpoint import CheckpointError
    from agilerl.training.trainer import LocalTrainer

    folder = _copy(run, tmp_path)
    _write_index(folder, [])
    manifest = dict(TINY_DQN, training={**TINY_DQN["training"], "pop_size": 2})
    with pytest.raises(CheckpointError, match="is a JSON list"):
        LocalTrainer.from_manifest(manifest, resume_from_checkpoint=folder)


def _made(path: Path, content: bytes | None) -> Path:
    """``path`` created as a folder (``content`` None) or a file holding ``content``."""
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda tmp: tmp / "nowhere", "does not exist"),
        (lambda tmp: _made(tmp / "empty", None), "holds no complete checkpoint"),
        (lambda tmp: _made(tmp / "x.pt", b"junk"), "agent file"),
        (lambda tmp: _made(tmp / "y.pt", _pickled({"no": "algo"})), "not an agilerl agent"),
    ],
    ids=["missing", "empty folder", "junk agent file", "other pickle"],
)
def test_unusable_resume_paths(run, tmp_path, capsys, make, needle):
    code, err = _resume(capsys, run, make(tmp_path))
    assert code == EXIT_USAGE and needle in err and "internal error" not in err


def test_newest_damaged_checkpoint_in_a_folder_is_refused_naming_the_previous(
        run, tmp_path, capsys):
    older, newer = _copy(run, tmp_path, 0), _copy(run, tmp_path, 1)
    _edit(_set_file("member_0.pt", "size", 3))(newer)
    code, err = _resume(capsys, run, newer.parent)
    assert code == EXIT_USAGE
    assert "roll the run back" in err and str(newer) in err and str(older) in err


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["environment.name=Acrobot-v1"], "environment.name: the checkpoint has 'CartPole-v1'"),
        (["environment.num_envs=2"], "environment.num_envs: the checkpoint has 4"),
        (["network.latent_dim=32"], "network.latent_dim: the checkpoint has 16, this manifest 32"),
        (["network.head_config.hidden_size=[8]"], "network.head_config.hidden_size"),
        (["training.pop_size=3"], "training.pop_size: the checkpoint holds 2 members"),
    ],
)
def test_resume_into_a_different_manifest_says_what_differs(run, tmp_path, capsys, overrides,
                                                            needle):
    folder = _copy(run, tmp_path)
    code, err = _resume(capsys, run, folder, *overrides)
    assert code == EXIT_USAGE, err
    assert "does not fit this manifest" in err and needle in err


def test_resume_into_another_algorithm(run, tmp_path, capsys):
    from .conftest import TINY_PPO

    folder = _copy(run, tmp_path)
    ppo = tmp_path / "ppo.yaml"
    ppo.write_text(yaml.safe_dump(dict(TINY_PPO, network=TINY_DQN["network"]), sort_keys=False))
    code, err = _train(capsys, ppo, "--no-verbose", "--run-dir", tmp_path / "o",
                       "--resume-from-checkpoint", folder)
    assert code == EXIT_USAGE
    assert "algorithm: the checkpoint trains DQN, this manifest PPO" in err


def test_resume_mismatch_from_python_is_a_typed_error(run, tmp_path):
    from agilerl.checkpoint import CheckpointError, ResumeMismatchError
    from agilerl.training.trainer import LocalTrainer

    manifest = dict(TINY_DQN, training={**TINY_DQN["training"], "pop_size": 2},
                    environment={"name": "Acrobot-v1", "num_envs": 4})
    with pytest.raises(ResumeMismatchError, match="environment.name") as info:
        LocalTrainer.from_manifest(manifest, resume_from_checkpoint=run["checkpoints"][-1])
    assert isinstance(info.value, CheckpointError)


def _cuda_devices() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.parametrize(
    ("device", "needle"),
    [
        ("cpuu", "device 'cpuu' is not a torch device"),
        ("gpu", "device 'gpu' is not a torch device"),
        ("cuda:x", "device 'cuda:x' is not a torch device"),
        ("meta", "device 'meta' is not available"),
        ("cuda:7", "device 'cuda:7' is not available"),
        pytest.param("cuda", "device 'cuda' is not available",
                     marks=pytest.mark.skipif(_cuda_devices() > 0, reason="a GPU is here")),
        pytest.param("mps", "device 'mps' is not available",
                     marks=pytest.mark.skipif(
                         torch.backends.mps.is_available(), reason="MPS is here")),
    ],
)
def test_unavailable_device_is_named_before_anything_is_built(run, capsys, monkeypatch,
                                                              device, needle):
    if device == "cuda:7" and _cuda_devices() > 7:
        pytest.skip("this machine has 8 GPUs")
    import agilerl.envs

    def no_env(*args, **kwargs):
        raise AssertionError("an environment was built before the device was checked")

    monkeypatch.setattr(agilerl.envs, "make_vector_env", no_env)
    code, err = _train(capsys, run["manifest"], "--no-verbose", "--device", device)
    assert code == EXIT_USAGE
    assert needle in err and len(err.strip().splitlines()) == 1


def test_unavailable_device_from_python(monkeypatch):
    from agilerl.core.errors import DeviceUnavailableError
    from agilerl.training.trainer import LocalTrainer

    with pytest.raises(DeviceUnavailableError, match="'cpuu' is not a torch device"):
        LocalTrainer(algorithm="DQN", environment="CartPole-v1", device="cpuu")
    with pytest.raises(ValueError, match="'cuda:99' is not available"):
        LocalTrainer(algorithm="DQN", environment="CartPole-v1", device="cuda:99")


def test_missing_box2d_names_the_extra(run, capsys, monkeypatch):
    import agilerl.envs.gym_env as gym_env

    monkeypatch.setattr(gym_env, "_box2d_installed", lambda: False)
    code, err = _train(capsys, run["manifest"], "--no-verbose", "environment.name=LunarLander-v3",
                       "environment.num_envs=2")
    assert code == EXIT_USAGE
    assert "pip install 'agilerl[box2d]'" in err


@pytest.mark.parametrize(("module", "extra"), [("mpe2", "mpe"), ("Box2D", "box2d"),
                                               ("mpe2.mpe", "mpe"), ("h5py", "offline")])
def test_missing_extra_maps_modules_to_extras(module, extra):
    from agilerl.core.errors import MissingExtraError, missing_extra

    error = missing_extra(ModuleNotFoundError(f"No module named {module!r}", name=module),
                          "environment 'x'")
    assert isinstance(error, MissingExtraError) and isinstance(error, ImportError)
    assert f"pip install 'agilerl[{extra}]'" in str(error)
    assert missing_extra(ModuleNotFoundError("x", name="not_an_extra"), "x") is None


def test_missing_mpe2_from_an_env_factory_is_named(monkeypatch):
    """An environment factory that imports a missing extra (mpe2) gets the install hint."""
    from agilerl.core.errors import MissingExtraError
    from agilerl.training.trainer import LocalTrainer

    class Spec:
        name = "simple_spread_v3"

        def make_env(self):
            raise ModuleNotFoundError("No module named 'mpe2'", name="mpe2")

    with pytest.raises(MissingExtraError, match=r"pip install 'agilerl\[mpe\]'"):
        LocalTrainer(algorithm="DQN", environment=Spec())


@pytest.mark.parametrize(
    ("override", "code", "needle"),
    [
        ("network.encoder_config={arch: lstm, hidden_state_size: 16}", EXIT_INVALID,
         "encoder arch 'lstm' is not supported by DQN"),
        ("network.encoder_config={arch: simba, hidden_size: 16, num_blocks: 5, max_blocks: 4}",
         EXIT_INVALID, "network.encoder_config.num_blocks"),
        ("network.encoder_config={arch: cnn, channel_size: [8], kernel_size: [3], "
         "stride_size: [1]}", EXIT_INVALID, "the cnn encoder takes image observations"),
        ("environment.name=Pendulum-v1", EXIT_INVALID, "Pendulum-v1"),
        ("environment.wrappers=[nosuch.mod.Wrapper]", EXIT_USAGE,
         "cannot build environment 'CartPole-v1': ModuleNotFoundError"),
        ("environment.wrappers=[gymnasium.wrappers.NoSuchWrapper]", EXIT_USAGE,
         "does not define 'NoSuchWrapper'"),
        ("environment.entrypoint=nosuch_module:make_env", EXIT_USAGE,
         "Could not resolve module 'nosuch_module'"),
        ("environment.entrypoint=gymnasium:no_such_function", EXIT_USAGE,
         "does not define 'no_such_function'"),
    ],
)
def test_settings_that_cannot_be_built(run, capsys, override, code, needle):
    status, err = _train(capsys, run["manifest"], "--no-verbose", "--run-dir",
                         run["root"] / "unused", override)
    assert status == code, err
    assert needle in err


def test_unsupported_encoder_from_python_is_a_typed_error():
    from agilerl.core.errors import UnsupportedAlgorithmError, UnsupportedSettingError
    from agilerl.training.trainer import LocalTrainer

    network = dict(TINY_DQN["network"], encoder_config={"arch": "lstm",
                                                        "hidden_state_size": 8})
    manifest = dict(TINY_DQN, network=network)
    with pytest.raises(UnsupportedSettingError, match="'lstm' is not supported by DQN") as info:
        LocalTrainer.from_manifest(manifest)
    assert isinstance(info.value, UnsupportedAlgorithmError)


def test_wandb_without_a_key_never_prompts(run, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    code, err = _train(capsys, run["manifest"], "--no-verbose", "--wb", "--run-dir",
                       tmp_path / "r")
    assert code == EXIT_USAGE
    assert "needs an API key" in err and "WANDB_MODE=offline" in err and "wandb login" in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--seed", "-1"], "--seed: must be at least 0"),
        (["--torch-threads", "0"], "--torch-threads: must be at least 1"),
        (["--checkpoint-steps", "-5"], "--checkpoint-steps: must be at least 0"),
        (["--seed", "one"], "expected a whole number"),
    ],
)
def test_bad_option_values_are_usage_errors(run, capsys, args, needle):
    with pytest.raises(SystemExit) as info:
        main([str(run["manifest"]), "--no-verbose", *args])
    err = capsys.readouterr().err
    assert info.value.code == EXIT_USAGE and needle in err and "Traceback" not in err


@pytest.mark.parametrize("option", ["--run-dir", "--checkpoint-path", "--tensorboard-log-dir"])
def test_a_file_where_a_folder_goes_is_named(run, tmp_path, capsys, option):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    extra = ["--checkpoint-steps", "200"] if option == "--checkpoint-path" else []
    extra += ["--tensorboard"] if option == "--tensorboard-log-dir" else []
    extra += [] if option == "--run-dir" else ["--run-dir", str(tmp_path / "r")]
    code, err = _train(capsys, run["manifest"], "--no-verbose", "training.max_steps=200",
                       "training.pop_size=2", option, blocker, *extra)
    assert code == EXIT_USAGE
    assert f"cannot use {blocker}" in err


def test_agent_file_of_another_algorithm(run, tmp_path, capsys):
    from .conftest import TINY_PPO

    ppo = tmp_path / "ppo.yaml"
    ppo.write_text(yaml.safe_dump(dict(TINY_PPO, training={**TINY_PPO["training"],
                                                           "max_steps": 128}), sort_keys=False))
    code, _ = _train(capsys, ppo, "--no-verbose", "--save-elite", "--run-dir", tmp_path / "p")
    assert code == 0
    code, err = _resume(capsys, run, tmp_path / "p" / "elite.pt")
    assert code == EXIT_USAGE
    assert "holds a PPO agent; this manifest trains DQN" in err


def test_a_run_folder_resumes_from_its_newest_checkpoint(run, tmp_path, capsys):
    from agilerl.checkpoint import find_checkpoint

    assert find_checkpoint(run["root"] / "r").path == run["checkpoints"][-1]


FLAKY_ENV = """
import gymnasium as gym


class FlakyEnv(gym.Wrapper):
    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self.calls = 0

    def step(self, action):
        self.calls += 1
        if self.calls > 500:
            raise RuntimeError("sensor disconnected")
        return self.env.step(action)
"""


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "worker processes"])
def test_environment_code_failing_while_training_is_not_an_internal_error(
        run, tmp_path, capsys, monkeypatch, sync):
    (tmp_path / "flaky.py").write_text(FLAKY_ENV)
    monkeypatch.chdir(tmp_path)  # entrypoint files are found from the working folder
    manifest = dict(TINY_DQN, environment={"name": "Flaky", "entrypoint": "flaky:FlakyEnv",
                                           "num_envs": 2, "sync": sync})
    path = tmp_path / "flaky.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    code, err = _train(capsys, path, "--no-verbose", "--run-dir", tmp_path / "r",
                       "--checkpoint-steps", "200", "training.pop_size=2",
                       "training.max_steps=2000", "--workers", "1")
    assert code == 4, err
    assert "sensor disconnected" in err
    assert ("flaky.py:" in err) if sync else ("'Flaky'" in err)
    named = err.split("the last checkpoint, ", 1)[1].split(", is intact")[0]
    assert read_checkpoint(named).pop_size == 2


@pytest.mark.parametrize(
    ("gpus", "device", "answer"),
    [(1, "cuda:7", "this machine has 1 CUDA device(s) (cuda:0 to cuda:0)"),
     (0, "cuda", "no CUDA GPU is visible on this machine"),
     (2, "cuda:1", None), (1, "cuda", None)],
)
def test_device_check_on_a_cuda_build(monkeypatch, gpus, device, answer):
    """What a CUDA build of torch answers, whatever this machine has."""
    from agilerl.core.errors import DeviceUnavailableError
    from agilerl.training.build import resolve_device

    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    if answer is None:
        assert resolve_device(device) == device
    else:
        with pytest.raises(DeviceUnavailableError, match=re.escape(answer)):
            resolve_device(device)


def test_unfinished_newest_checkpoint_resumes_from_the_previous_with_a_warning(
        run, tmp_path, capsys):
    older, newer = _copy(run, tmp_path, 0), _copy(run, tmp_path, 1)
    (newer / "index.json").unlink()
    (newer / f".trainer.pt.tmp-{2**22 + 5}").write_bytes(b"half")  # killed mid-write
    code, err = _train(capsys, run["manifest"], "--no-verbose", "--run-dir", tmp_path / "out",
                       "training.pop_size=2", "training.max_steps=600", "--checkpoint-steps",
                       "200", "--checkpoint-path", newer.parent,
                       "--resume-from-checkpoint", newer.parent)
    assert code == 0, err
    assert "agilerl train: warning: the newest checkpoint" in err
    assert str(newer) in err and str(older) in err
    assert not newer.exists()  # the torn write was cleaned up by the next checkpoint
