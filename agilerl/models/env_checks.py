"""Cheap local checks on the environment section: nothing is built or imported.

* Gymnasium ids are looked up in Gymnasium's registry (read once per Gymnasium version and
  cached on disk, so repeated validations do not pay for importing Gymnasium).
* PettingZoo module paths are looked up on disk below the installed top-level package
  (``importlib.util.find_spec`` on the top level only: importing the module would run it).
* Data files are looked up relative to the manifest's folder, then the working directory.

A check reports an error when the value cannot work: an id that is not registered (a
program that registers its own ids has imported Gymnasium, whose live registry is then
used), a version that does not exist, a package that is not installed for a
``package:Id`` reference. What it cannot decide locally is a warning naming what to
install: a namespace whose package is not installed (``ALE/...``), an environment whose
optional dependency is missing (Box2D). The ids this library registers itself
(``DummyImage-v0``) and those of the namespaces it loads itself (``ALE/*`` with ale-py
installed) count as registered.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agilerl.core.environment_facts import moved_module
from agilerl.models.algo import ALGO_REGISTRY
from agilerl.models.suggest import closest

_GYM_ID = re.compile(r"^(?:(?P<ns>[^/]+)/)?(?P<name>.+?)(?:-v(?P<version>\d+))?$")


@dataclass(frozen=True)
class Finding:
    """Result of one check: an error or a warning, with an optional suggestion."""

    severity: str
    message: str
    suggestion: str | None = None
    kind: str = "environment"
    """``missing_package``: the environment needs a package that is not installed (a
    warning for ``validate``, which may run on another machine than training; ``train``
    refuses it)."""


# --------------------------------------------------------------------------- Gymnasium ids


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "agilerl"


#: Entry-point module prefix → (module the environments need, how to install it).
_OPTIONAL_FAMILIES = {
    "gymnasium.envs.box2d": ("Box2D", "pip install 'agilerl[box2d]'"),
    "gymnasium.envs.mujoco": ("mujoco", "pip install 'agilerl[mujoco]'"),
}

#: Gymnasium namespaces registered by a separate package → (its module, how to install it).
_NAMESPACE_PACKAGES = {
    "ALE": ("ale_py", "pip install 'agilerl[atari]'"),
    "MiniGrid": ("minigrid", "pip install minigrid"),
    "BabyAI": ("minigrid", "pip install minigrid"),
}


def _entry_module(entry_point: object) -> str:
    if isinstance(entry_point, str):
        return entry_point.split(":", 1)[0]
    return str(getattr(entry_point, "__module__", ""))


def gymnasium_ids() -> dict[str, str] | None:
    """Registered Gymnasium ids → module of their entry point; None without Gymnasium.

    When Gymnasium is already imported its live registry is used (so ids registered by the
    program count); otherwise the ids a fresh import registers, cached on disk. The ids
    this library ships (``agilerl.env_registry``) are always included.
    """
    live = sys.modules.get("gymnasium")
    if live is not None and hasattr(live, "registry"):
        ids = {env_id: _entry_module(spec.entry_point) for env_id, spec in live.registry.items()}
    else:
        ids = installed_gymnasium_ids()  # type: ignore[assignment]
    if ids is None:
        return None
    return {**shipped_ids(), **loaded_namespace_ids(), **ids}


#: Namespaces whose package the environment builders import themselves (``ALE/*`` ids:
#: ``agilerl.envs.atari``) → that package.
_LOADED_NAMESPACES = {"ALE": "ale_py"}


def loaded_namespace_ids() -> dict[str, str]:
    """Ids of :data:`_LOADED_NAMESPACES` whose package is installed (listed once per
    package version and cached on disk)."""
    ids: dict[str, str] = {}
    for ns, module in _LOADED_NAMESPACES.items():
        ids.update(_namespace_ids(ns, module) or {})
    return ids


@functools.cache
def _namespace_ids(ns: str, module: str) -> dict[str, str] | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return None
    try:
        stamp = f"{spec.origin}|{Path(spec.origin).stat().st_mtime_ns}|{gymnasium_stamp()}"
    except OSError:
        stamp = f"{spec.origin}|{gymnasium_stamp()}"
    cache = cache_file(f"namespace-{ns}", stamp)
    try:
        cached = json.loads(cache.read_text())
        if isinstance(cached, dict):
            return cached
    except (OSError, ValueError):
        pass
    try:
        import gymnasium

        gymnasium.register_envs(importlib.import_module(module))
    except Exception:  # a broken install is reported when training builds the env
        return None
    ids = {env_id: _entry_module(entry.entry_point)
           for env_id, entry in sorted(gymnasium.registry.items())
           if env_id.startswith(f"{ns}/")}
    write_cache(cache, ids)
    return ids


def shipped_ids() -> dict[str, str]:
    """The Gymnasium ids this library registers itself → module of their environment."""
    from agilerl.env_registry import SHIPPED_ENVS

    return {env_id: _entry_module(entry) for env_id, entry in SHIPPED_ENVS.items()}


@functools.lru_cache(maxsize=1)
def gymnasium_stamp() -> str | None:
    """Identifies the installed Gymnasium (its path and modification time); None without it."""
    try:
        spec = importlib.util.find_spec("gymnasium")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return None
    registrations = Path(spec.origin).parent / "envs" / "__init__.py"
    try:
        return f"{spec.origin}|{registrations.stat().st_mtime_ns}|{sys.version_info[:2]}"
    except OSError:
        return f"{spec.origin}|{sys.version_info[:2]}"


def cache_file(kind: str, *parts: str) -> Path:
    key = hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]
    return _cache_dir() / f"gymnasium-{kind}-{key}.json"


def write_cache(cache: Path, data: object) -> None:
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(cache)
    except OSError:
        pass


@functools.lru_cache(maxsize=1)
def installed_gymnasium_ids() -> dict[str, str] | None:
    stamp = gymnasium_stamp()
    if stamp is None:
        return None
    cache = cache_file("registry", stamp)
    try:
        cached = json.loads(cache.read_text())
        if isinstance(cached, dict):
            return cached
    except (OSError, ValueError):
        pass
    try:
        import gymnasium
    except Exception:  # a broken install is reported as "cannot check", not as a crash
        return None
    ids = {env_id: _entry_module(spec.entry_point)
           for env_id, spec in sorted(gymnasium.registry.items())}
    write_cache(cache, ids)
    return ids


def check_gym_id(env_id: str, registered: Mapping[str, str] | None = None) -> Finding | None:
    """None when ``env_id`` is registered (and its optional dependencies installed);
    otherwise an error or warning explaining why not."""
    ids = gymnasium_ids() if registered is None else registered
    if ids is None:
        return Finding("warning", "Gymnasium is not installed here; the id was not checked")
    if env_id in ids:
        return _missing_dependency(env_id, ids[env_id])
    if ":" in env_id:
        return _package_reference(env_id)
    match = _GYM_ID.match(env_id)
    ns, name, version = (match.group("ns"), match.group("name"), match.group("version")) if match else (None, env_id, None)
    family = f"{ns}/{name}" if ns else name
    versions = sorted(
        (int(m.group("version")) for other in ids if (m := _GYM_ID.match(other)) and m.group("version")
         and (f"{m.group('ns')}/{m.group('name')}" if m.group("ns") else m.group("name")) == family),
    )
    if versions:
        latest = f"{family}-v{versions[-1]}"
        have = ", ".join(f"v{v}" for v in versions)
        what = f"version v{version}" if version is not None else "an id without a version"
        return Finding("error", f"'{env_id}' is not registered: {what} of '{family}' does not "
                       f"exist (registered: {have})", latest)
    if ns and ns not in {other.split("/", 1)[0] for other in ids if "/" in other}:
        return _unregistered_namespace(env_id, ns)
    suggestion = closest(env_id, ids, cutoff=0.85)
    if suggestion:
        return Finding("error", f"'{env_id}' is not a registered Gymnasium id", suggestion)
    return Finding("error", f"'{env_id}' is not a registered Gymnasium id; for your own "
                   "environment give environment.entrypoint ('module:factory'), or write "
                   "'package:Id' for an id that a package registers when imported")


#: Module path prefixes of PettingZoo (multi-agent) environments, as ``environment.name``s.
PETTINGZOO_PREFIXES = ("mpe2.", "pettingzoo.")


def check_single_agent_env(env_id: str, algo: str) -> Finding | None:
    """An error when a single-agent algorithm (``algo``) is given a PettingZoo env id: it
    names the multi-agent algorithms instead of calling the id an unregistered Gymnasium one."""
    if not env_id.startswith(PETTINGZOO_PREFIXES) or ":" in env_id:
        return None
    multi = sorted(name for name, cls in ALGO_REGISTRY.items() if cls.env_kind == "pettingzoo")
    return Finding("error", f"'{env_id}' is a PettingZoo (multi-agent) environment and {algo} "
                   "is a single-agent algorithm; train it with a multi-agent algorithm: "
                   f"algorithm.name {', '.join(multi)}")


def _package_reference(env_id: str) -> Finding | None:
    """``package:Id`` (Gymnasium imports ``package``, which registers ``Id``)."""
    module = env_id.split(":", 1)[0]
    top = module.split(".", 1)[0]
    if not module or not all(part.isidentifier() for part in module.split(".")):
        return Finding("error", f"'{env_id}' is neither a registered Gymnasium id nor "
                       "'package:Id' with a Python package name before the colon")
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return Finding("error", f"'{env_id}' needs the Python package '{top}', which is not "
                       "installed here")
    return Finding("warning", f"'{env_id}' is registered when '{module}' is imported; the id "
                   "was not checked")


def _unregistered_namespace(env_id: str, ns: str) -> Finding:
    module, install = _NAMESPACE_PACKAGES.get(ns, (None, None))
    if module is None:
        return Finding("error", f"Gymnasium namespace '{ns}' is not registered, so "
                       f"'{env_id}' does not exist here; if a package provides it, install "
                       f"it and write 'package:{env_id}'")
    if importlib.util.find_spec(module) is None:
        return Finding("warning", f"'{env_id}' needs the {module} package, which is not "
                       f"installed here ({install}); training refuses it until it is",
                       kind="missing_package")
    return Finding("warning", f"namespace '{ns}' is registered when {module} is imported; "
                   f"write '{module}:{env_id}' so that it is; the id was not checked")


def _missing_dependency(env_id: str, entry_module: str) -> Finding | None:
    for prefix, (module, install) in _OPTIONAL_FAMILIES.items():
        if entry_module.startswith(prefix) and importlib.util.find_spec(module) is None:
            return Finding("warning", f"'{env_id}' needs the {module} package, which is not "
                           f"installed here ({install}); training refuses it until it is",
                           kind="missing_package")
    return None


# --------------------------------------------------------------------------- Python modules


def _module_names(folder: Path) -> list[str]:
    suffixes = tuple(importlib.machinery.all_suffixes())
    names = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.is_dir() and entry.name.isidentifier():
            names.append(entry.name)
        elif entry.name.endswith(suffixes):
            names.append(entry.name.split(".", 1)[0])
    return [n for n in names if not n.startswith("_")]


def _find_child(folders: list[str], part: str) -> tuple[bool, list[str]]:
    """Whether ``part`` exists in one of ``folders``; its own search folders if a package."""
    suffixes = importlib.machinery.all_suffixes()
    for folder in folders:
        base = Path(folder) / part
        if base.is_dir():
            return True, [str(base)]
        if any((Path(folder) / f"{part}{suffix}").is_file() for suffix in suffixes):
            return True, []
    return False, []


def _leaf_elsewhere(leaf: str, top: str) -> str | None:
    """A top-level package other than ``top`` that ships a module called ``leaf``."""
    for other in ("mpe2",):  # PettingZoo's MPE environments moved into the mpe2 package
        spec = importlib.util.find_spec(other) if other != top else None
        if spec and spec.submodule_search_locations:
            found, _ = _find_child(list(spec.submodule_search_locations), leaf)
            if found:
                return f"{other}.{leaf}"
    return None


def check_module_path(dotted: str) -> Finding | None:
    """None when ``dotted`` (e.g. ``mpe2.simple_speaker_listener_v4``) exists on disk."""
    moved = moved_module(dotted)
    if moved is not None:
        return check_module_path(moved)
    parts = dotted.split(".")
    if not all(part.isidentifier() for part in parts):
        return Finding("error", f"'{dotted}' is not a Python module path (expected e.g. "
                       "'mpe2.simple_speaker_listener_v4')")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return Finding("warning", f"package '{parts[0]}' is not installed here; "
                       f"'{dotted}' was not checked")
    folders = list(spec.submodule_search_locations or [])
    for depth, part in enumerate(parts[1:], start=1):
        if not folders:
            return Finding("error", f"'{'.'.join(parts[:depth])}' is a module, not a package, "
                           f"so '{dotted}' does not exist")
        found, sub = _find_child(folders, part)
        if not found:
            return _missing_module(dotted, parts, depth, folders)
        folders = sub
    return None


def _missing_module(dotted: str, parts: list[str], depth: int, folders: list[str]) -> Finding:
    parent = ".".join(parts[:depth])
    siblings = [name for folder in folders for name in _module_names(Path(folder))]
    near = closest(parts[depth], siblings, cutoff=0.8)
    if near:
        fixed = ".".join([*parts[:depth], near, *parts[depth + 1 :]])
        return Finding("error", f"module '{dotted}' does not exist: '{parent}' has no "
                       f"'{parts[depth]}'", fixed)
    moved = _leaf_elsewhere(parts[-1], parts[0]) if depth == len(parts) - 1 else None
    if moved:
        return Finding("warning", f"module '{dotted}' is not installed here; the same "
                       f"environment is available as '{moved}'", moved)
    return Finding("warning", f"module '{dotted}' was not found below '{parent}'; it must be "
                   "importable when the environment is built")


# --------------------------------------------------------------------------- references


def check_reference(ref: str, dotted_ok: bool = False) -> Finding | None:
    """An entrypoint/wrapper reference must read ``<module-or-file>:<attr>`` (wrappers may
    also be a dotted import path ``pkg.mod.Attr``)."""
    module, sep, attr = ref.rpartition(":")
    if sep and module and attr:
        return None
    if dotted_ok and not sep and "." in ref.strip(".") and all(p.isidentifier() for p in ref.split(".")):
        return None
    expected = "'<module-or-file>:<attr>'" + (" or 'package.module.Attr'" if dotted_ok else "")
    return Finding("error", f"Invalid entrypoint format {ref!r}: expected {expected}")


# --------------------------------------------------------------------------- files


def find_file(value: str, base_dir: Path | None) -> Path | None:
    """``value`` resolved against the manifest folder, then the working directory."""
    candidate = Path(os.path.expanduser(value))
    if candidate.is_absolute():
        return candidate if candidate.exists() else None
    for root in (base_dir, Path.cwd()):
        if root is not None and (root / candidate).exists():
            return root / candidate
    return None


def check_file(value: str, base_dir: Path | None) -> Finding | None:
    """None when the file exists; an error naming where it was looked for otherwise."""
    if find_file(value, base_dir) is not None:
        return None
    places = [str(p) for p in dict.fromkeys(p for p in (base_dir, Path.cwd()) if p is not None)]
    where = " or ".join(places)
    return Finding("error", f"file '{value}' not found (looked in {where})")
