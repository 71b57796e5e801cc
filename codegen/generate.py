"""Compute every generated file (path relative to the repository root -> text)."""

from __future__ import annotations

from pathlib import Path

from codegen import bundle, docs
from codegen.algorithm_modules import ALGORITHMS_PACKAGE, algorithm_files
from codegen.attributes_gen import ATTRIBUTES_PATH, attributes_module
from codegen.catalog import Catalog, load
from codegen.codegen_input import codegen_document
from codegen.pydantic_gen import rewrite, run_datamodel_codegen
from codegen.registry_gen import class_tags, init_module, registry_module
from codegen.targets import models_for
from codegen.templates import ARENA_DOC, LOCAL_DOC, base_module

PACKAGES = {"local": "agilerl/models/_generated", "arena": "agilerl/arena/models/_generated"}
#: Folders whose every ``.py`` file codegen writes (others there are stale and removed).
GENERATED_DIRS = (*PACKAGES.values(), ALGORITHMS_PACKAGE)
BUNDLE_PATH = "agilerl/schemas/manifest.schema.json"
ARENA_BUNDLE_PATH = "agilerl/schemas/arena-manifest.schema.json"
DOCS_PATH = "docs/reference/manifest.md"
#: Schemas shipped verbatim in the package (``schemas/`` name -> packaged path).
COPIED_SCHEMAS = {"run_events.schema.json": "agilerl/schemas/run_events.schema.json"}


def _model_set(catalog: Catalog, target: str) -> dict[str, str]:
    models = models_for(catalog, target)
    unions = {n: (s["x-discriminator"], s.get("x-default-tag")) for n, s in models.items()
              if "x-discriminator" in s}
    source = run_datamodel_codegen(codegen_document(models))
    closed = {n for n, s in models.items() if target == "arena" and s.get("x-arena-closed")}
    package = PACKAGES[target]
    return {
        f"{package}/__init__.py": init_module(LOCAL_DOC if target == "local" else ARENA_DOC,
                                              {n: s for n, s in models.items()}, catalog),
        f"{package}/_base.py": base_module(target),
        f"{package}/models.py": rewrite(source, target, class_tags(models), unions, closed),
        f"{package}/registry.py": registry_module(catalog, models, target),
    }


def outputs(repo: Path) -> dict[str, str]:
    """Every generated file of the repository rooted at ``repo``."""
    catalog = load(repo / "schemas")
    files: dict[str, str] = {}
    for target in PACKAGES:
        files.update(_model_set(catalog, target))
    files[ATTRIBUTES_PATH] = attributes_module(catalog, files[f"{PACKAGES['local']}/models.py"])
    files.update(algorithm_files(catalog, models_for(catalog, "arena")))
    files[BUNDLE_PATH] = bundle.render(catalog, "local")
    files[ARENA_BUNDLE_PATH] = bundle.render(catalog, "arena")
    files[DOCS_PATH] = docs.render(catalog)
    for source, target in COPIED_SCHEMAS.items():
        files[target] = (repo / "schemas" / source).read_text(encoding="utf-8")
    return files
