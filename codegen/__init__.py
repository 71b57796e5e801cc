"""Code generator: ``schemas/`` (JSON Schema) -> Pydantic models, registry, bundle, docs.

Run ``python -m codegen`` from the repository root (``--check`` to verify committed output).
See codegen/README.md.
"""
