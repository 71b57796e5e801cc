"""The light ``agilerl-arena`` wheel (``make dist-arena``): what it holds imports no torch,
no gymnasium, and the client, models and ``arena --help`` work from it alone."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "gymnasium", "pettingzoo", "numpy")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location("arena_wheel_build",
                                                  ROOT / "tools" / "arena_wheel" / "build.py")
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    tmp = tmp_path_factory.mktemp("arena-wheel")
    return Path(builder.build(tmp / "dist", tmp / "staging"))


def _module_level_imports(tree: ast.Module) -> list[str]:
    """Modules imported when the file is imported (not inside functions or TYPE_CHECKING)."""
    found: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append(node.module)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(tree.body)
    return found


def test_the_wheel_holds_no_torch_importing_module(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        sources = {n: zf.read(n).decode() for n in names if n.endswith(".py")}
    assert "agilerl/arena/client.py" in names and "agilerl/arena/cli.py" in names
    assert "agilerl/models/manifest.py" in names and "agilerl/training/trainer.py" in names
    assert not [n for n in names if n.startswith("agilerl/arena/server/")]
    modules = {n.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
               for n in sources}
    for name, text in sources.items():
        for imported in _module_level_imports(ast.parse(text, name)):
            assert imported.split(".")[0] not in HEAVY, f"{name} imports {imported}"
            if imported.startswith("agilerl"):
                assert imported in modules or any(
                    f"{imported}.{sub}" in modules for sub in ("__init__",)
                ), f"{name} imports {imported}, which the wheel lacks"
    with zipfile.ZipFile(wheel) as zf:
        entry_points = zf.read(next(n for n in names if n.endswith("entry_points.txt")))
        metadata = zf.read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert b"arena = agilerl.arena.cli:main" in entry_points
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist")]
    assert not [r for r in requires if any(h in r for h in HEAVY)], requires


def test_the_wheel_alone_imports_and_runs_without_torch(wheel: Path, tmp_path: Path) -> None:
    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
        modules = sorted(n.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
                         for n in zf.namelist() if n.endswith(".py"))
    # -S: no site hooks, so this checkout's editable install is invisible; the light
    # dependencies come from this environment's site-packages, torch & co. are blocked.
    script = f"""
import importlib, importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ImportError(f"{{name}} is not installed")
sys.meta_path.insert(0, Block())
sys.path[:0] = [{str(unpacked)!r}, {sysconfig.get_paths()["purelib"]!r}]
for name in {modules!r}:
    module = importlib.import_module(name)
    assert module.__file__.startswith({str(unpacked)!r}), module.__file__
from agilerl.arena import ArenaClient, ArenaTrainer
from agilerl.arena.models.algorithms.dqn import DQNSpec
client = ArenaClient(api_key="k", base_url="https://arena.example")
payload = ArenaTrainer(DQNSpec(batch_size=8), "CartPole-v1", client=client).to_manifest()
assert payload["algorithm"]["batch_size"] == 8
from agilerl.arena.cli import main
try:
    main(["--help"])
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
"""
    out = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "usage" in out.stdout.lower() and "experiments" in out.stdout
