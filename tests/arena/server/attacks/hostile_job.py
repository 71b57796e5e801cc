"""A hostile job for the attack tests: what a user's training code could do to the files
of its own experiment folder (stdlib only: it may run under an uploaded env's ``python -E``).

    hostile_job.py PLAN MANIFEST --checkpoint-path P --checkpoint-steps N --run-dir R
                   [--resume-from-checkpoint DIR]

``PLAN`` is a JSON file the test writes before submitting: ``{"mode": ..., ...}``.
Every run prints one JSON line ``{"argv": ..., "manifest": ..., ...}`` describing what it
was given and what it could read, so the test can check the server's side of the attack.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _checkpoint(root: Path, name: str, global_step: int) -> None:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.json").write_text(json.dumps({"summary": {"global_step": global_step}}))


def _can_read(path: Path) -> str:
    try:
        return f"read {len(path.read_bytes())} bytes"
    except OSError as exc:
        return f"denied ({exc.errno})"


def _link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for child in path.iterdir():
            child.unlink()
        path.rmdir()
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def widen(plan: dict, manifest: Path, ckpt: Path, resumed: bool) -> int:
    """First run: leave a checkpoint, rewrite the files that once set this job's
    privileges and budget, then wait to be interrupted by a server restart."""
    data = manifest.parents[2]
    if resumed:
        print(json.dumps({"jwt_secret": _can_read(data / "jwt_secret"),
                          "database": _can_read(data / "arena.sqlite3")}), flush=True)
        return 0
    _checkpoint(ckpt, "step_1", 2)
    root = manifest.parent
    # the whole data folder as the env's "source": read access to it on the next launch
    binding = {"name": plan["env"], "version": "v1", "source": str(data), "venv": sys.prefix}
    (root / "custom_env.json").write_text(json.dumps(binding))
    man = json.loads(manifest.read_text())
    man["training"].update(max_steps=10**9, checkpoint_steps=1, pop_size=64)
    manifest.write_text(json.dumps(man))
    print("widened", flush=True)
    time.sleep(3600)
    return 0


def plant(plan: dict, manifest: Path, ckpt: Path, run_dir: Path) -> int:
    """Replace this job's metrics, checkpoints and run folder with links to the files
    ``plan["links"]`` names (``{relative path in the experiment folder: target}``) and
    append ``plan["files"]`` (``{relative path: text}``)."""
    root = manifest.parent
    for rel, target in plan.get("links", {}).items():
        _link(root / rel, Path(target))
    for rel, text in plan.get("files", {}).items():  # e.g. appended to the server's log
        with (root / rel).open("a") as fh:
            fh.write(text)
    for name, step in plan.get("checkpoints", {}).items():
        _checkpoint(ckpt, name, step)
    print("planted", flush=True)
    return int(plan.get("exit", 0))


def bad_metrics(plan: dict, run_dir: Path) -> int:
    """Leave a metrics file the server cannot parse (``plan["kind"]``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics = run_dir / "metrics.csv"
    if metrics.exists() or metrics.is_symlink():
        metrics.unlink()
    kind = plan["kind"]
    if kind == "fifo":
        os.mkfifo(metrics)
    elif kind == "link":
        metrics.symlink_to(plan["target"])
    elif kind == "garbage":
        metrics.write_bytes(b"\x00\xff\xfe" * 3000 + b"\n\x00,\x01\n")
    elif kind == "utf8":
        metrics.write_bytes(b"train/global_step,x\n\xff\xfe\x9c,1\n4,\xc3\n")
    elif kind == "huge_line":
        metrics.write_bytes(b"train/global_step," + b"a" * (4 << 20) + b"\n1,2\n")
    print("metrics left", flush=True)
    return int(plan.get("exit", 0))


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text())
    args = sys.argv[2:]
    manifest = Path(args[0])
    ckpt = Path(args[args.index("--checkpoint-path") + 1])
    run_dir = Path(args[args.index("--run-dir") + 1])
    resumed = "--resume-from-checkpoint" in args
    seen = json.loads(manifest.read_text())
    print(json.dumps({"argv": args, "manifest_training": seen.get("training"),
                      "resumed": resumed}), flush=True)
    mode = plan["mode"]
    if mode == "widen":
        return widen(plan, manifest, ckpt, resumed)
    if mode == "plant":
        return plant(plan, manifest, ckpt, run_dir)
    if mode == "bad_metrics":
        if resumed:
            return 0
        if "checkpoints" in plan:
            for name, step in plan["checkpoints"].items():
                _checkpoint(ckpt, name, step)
        return bad_metrics(plan, run_dir)
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main())
