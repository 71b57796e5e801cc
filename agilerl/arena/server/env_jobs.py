"""Training jobs on uploaded environments.

A submitted manifest whose ``environment.name`` (and optional ``version``) names one of
the submitter's uploaded environments is rewritten to run it: ``entrypoint`` and ``path``
point at the validated version's source, ``config`` starts from its ``env_config``
(keys the manifest gives win), and ``version`` (a field the local trainer does not take)
is dropped. The experiment's row keeps the :class:`Binding` (``experiments.custom_env``),
from which the scheduler runs the job with that environment's interpreter and lets the
sandboxed job read its source and virtual environment. It is never read from the
experiment folder, which the job can rewrite: a binding there would let it choose what
its next launch may read.

Only the submitter's own environments are looked up, so a manifest can never name
another user's upload.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from agilerl.arena.server import environments, nofollow, states
from agilerl.arena.server.catalog import LATEST, NAME, Catalog
from agilerl.arena.server.env_install import venv_python
from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.policy import section
from agilerl.arena.server.runs import untrusted_json
from agilerl.arena.server.store import Row, Store

#: where servers before the database kept bindings wrote them (read only for such rows).
LEGACY_BINDING_FILE = "custom_env.json"


@dataclass(frozen=True)
class Binding:
    """The uploaded environment a run uses."""

    name: str
    version: str
    source: str
    venv: str

    @property
    def python(self) -> str:
        return str(venv_python(Path(self.venv)))

    def command(self, job_command: list[str]) -> list[str]:
        """``job_command`` run by this environment's interpreter (when it names this
        server's Python; another program is left as the operator configured it).

        ``-E`` drops the ``PYTHONPATH`` jobs are given, which would put the server's
        packages before the venv's (the venv finds them after its own); ``-u`` keeps the
        output unbuffered, as ``PYTHONUNBUFFERED`` otherwise does.
        """
        if job_command and Path(job_command[0]) == Path(sys.executable):
            return [self.python, "-E", "-u", *job_command[1:]]
        return list(job_command)

    def readable(self) -> list[str]:
        return [self.source, self.venv]


def not_validated(name: str, version: str) -> ApiError:
    return ApiError(422, "ENVIRONMENT_NOT_VALIDATED",
                    f"Environment '{name}' version '{version}' has not passed validation;"
                    f" run `arena env validate {name} --version {version}` first",
                    errors=[f"environment.name: '{name}' ({version}) is not validated"])


def resolve(catalog: Catalog, user_id: int, manifest: Mapping[str, object],
            allow_custom_code: bool) -> Binding | None:
    """Rewrite ``manifest`` in place for the user's uploaded environment it names.

    Returns None (manifest untouched) when it names none of them.

    :raises ApiError: 403 without ``--allow-custom-code``, 404 for an unknown version,
        422 when the version has not passed validation.
    """
    env = manifest.get("environment")
    if not isinstance(env, dict) or env.get("entrypoint") or not isinstance(env.get("name"), str):
        return None
    name, version = env["name"], env.get("version")
    row = catalog.environment(user_id, name, version if version not in LATEST else None)
    if row is None:
        if version not in LATEST and catalog.environments(user_id, name):
            raise ApiError(404, "ENVIRONMENT_NOT_FOUND",
                           f"Environment '{name}' version '{version}' not found",
                           errors=[f"environment.version: no version '{version}' of '{name}'"])
        # namespaced ids (ALE/...) register when their package is imported: the trainer
        # checks those; module: prefixes are custom code the trainer resolves
        plain = "/" not in name and ":" not in name
        if _kind(manifest) is not None and plain and not environments.exists(name):
            raise ApiError(404, "ENVIRONMENT_NOT_FOUND", f"Environment '{name}' not found",
                           errors=[f"environment.name: '{name}' is neither a built-in"
                                   " environment of this server nor one you uploaded"])
        return None
    if not allow_custom_code:
        raise ApiError(403, "CUSTOM_CODE_DISABLED",
                       f"Environment '{name}' is uploaded code and this server was not started"
                       " with --allow-custom-code")
    if not row["validated"]:
        raise not_validated(name, row["version"])
    kind, multi = _kind(manifest), bool(row["multi_agent"])
    if kind is not None and (kind == "pettingzoo") != multi:
        algorithm = section(manifest, "algorithm").get("name")
        wanted, has = ("multi-agent", "single-agent") if not multi else ("single-agent",
                                                                          "multi-agent")
        raise ApiError(422, "ENVIRONMENT_MISMATCH",
                       f"{algorithm} needs a {wanted} environment; '{name}' was uploaded as"
                       f" {has}", errors=[f"environment.name: '{name}' is {has}"])
    paths = catalog.env_dir(user_id, name, row["version"])
    env.pop("version", None)
    env["entrypoint"] = row["entrypoint"]
    env["path"] = str(paths / "source")
    env["config"] = {**(row["env_config"] or {}), **(env.get("config") or {})}
    return Binding(name=name, version=row["version"], source=str(paths / "source"),
                   venv=str(paths / "venv"))


def _kind(manifest: Mapping[str, object]) -> str | None:
    """``gym`` or ``pettingzoo`` when the manifest's algorithm trains on such an
    environment (whose name must then be known here); None for datasets and the like."""
    from agilerl.arena.models import _generated as gen

    entry = gen.REGISTRY.get(str(section(manifest, "algorithm").get("name")))
    kind = entry.environment if entry is not None else None
    return kind if kind in ("gym", "pettingzoo") else None


def binding_json(binding: Binding | None) -> str:
    """How a run's binding is kept in ``experiments.custom_env`` (``null``: none)."""
    return json.dumps(asdict(binding) if binding is not None else None)


def binding_of(row: Row, data_dir: Path) -> Binding | None:
    """The uploaded environment the experiment ``row`` runs on, from the server's record.

    Rows recorded before the database kept bindings (``custom_env`` NULL) fall back to
    the experiment's ``custom_env.json``, trusted only when it names the owner's own
    environment's folders exactly as the server lays them out, so a job that rewrote it
    gains nothing its owner's uploads did not already give it.
    """
    raw = row.get("custom_env")
    if raw is None:
        return _legacy_binding(row, data_dir)
    data = json.loads(raw)
    return Binding(**data) if isinstance(data, dict) else None


def _legacy_binding(row: Row, data_dir: Path) -> Binding | None:
    folder = data_dir / "experiments" / str(int(row["id"]))
    try:
        data = untrusted_json(nofollow.read_bytes(folder, LEGACY_BINDING_FILE))
    except OSError:
        return None
    fields = ("name", "version", "source", "venv")
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in fields):
        return None
    binding = Binding(**{k: v for k in fields if isinstance(v := data[k], str)})
    if not (NAME.match(binding.name) and NAME.match(binding.version)):
        return None
    root = data_dir / "environments" / str(int(row["user_id"])) / binding.name / binding.version
    if (binding.source, binding.venv) != (str(root / "source"), str(root / "venv")):
        return None
    return binding


def active_users_of(store: Store, data_dir: Path, user_id: int, name: str,
                    version: str | None) -> list[str]:
    """Names of the user's waiting or running experiments that use the environment
    (any version when ``version`` is None)."""
    users = []
    for row in store.in_states(states.ACTIVE):
        if row["user_id"] != user_id:
            continue
        binding = binding_of(row, data_dir)
        if binding and binding.name == name and version in (None, binding.version):
            users.append(str(row["name"]))
    return users
