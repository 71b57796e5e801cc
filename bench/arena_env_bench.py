"""Arena custom environments: time from upload to a validated environment.

    .venv/bin/python bench/arena_env_bench.py [--rounds 5]

Starts ``arena-server serve --allow-custom-code`` on a random loopback port in a temporary
data folder and uploads the walkthrough's environment (``docs/examples/line_world``) as
a new version each round, the way ``arena env validate LineWorld --source DIR`` does. For
each upload it records, seen from the client: the time to the ``validation`` stage's
``completed`` event (upload, unpack, venv, every check), with and without
``--do-rollouts``, and the time to the end of the stream (automatic profiling included).
Prints the medians as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from agilerl.arena.server.testing import create_token, server_process
from agilerl.arena.upload import discover_sidecars, pack_source

SOURCE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "line_world"
CREATE = "/api/cli/v1/environments/create-and-validate"


def upload(http: httpx.Client, version: str, rollouts: bool) -> dict[str, float]:
    _, config = discover_sidecars(SOURCE, None, None)
    name, archive, kind = pack_source(SOURCE)
    assert config is not None
    files = {"file": (name, archive, kind),
             "env_config": (config.name, config.read_bytes(), "application/x-yaml"),
             "requirements": ("requirements.txt", b"", "text/plain")}
    data = {"name": "LineWorld", "version": version, "multi_agent": "false",
            "language_based": "false", "do_rollouts": str(rollouts).lower()}
    start = time.perf_counter()
    times: dict[str, float] = {}
    with http.stream("POST", CREATE, data=data, files=files, timeout=600) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("status") == "failed":
                raise RuntimeError(f"validation failed: {event}")
            if event.get("kind") == "status" and event.get("status") == "completed":
                times.setdefault(event["stage"], time.perf_counter() - start)
    archive.close()
    times["stream_end"] = time.perf_counter() - start
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        token = create_token(data_dir, "bench")
        with server_process(data_dir, "--allow-custom-code") as (url, _):
            http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"})
            runs: dict[str, list[dict[str, float]]] = {"checks": [], "with_rollouts": []}
            for i in range(args.rounds):
                runs["checks"].append(upload(http, f"a{i}", rollouts=False))
                runs["with_rollouts"].append(upload(http, f"b{i}", rollouts=True))
            http.close()
    summary: dict[str, Any] = {"rounds": args.rounds}
    for label, found in runs.items():
        for stage in ("upload", "install", "validation", "stream_end"):
            summary[f"{label}.{stage}_s"] = round(
                statistics.median(t[stage] for t in found), 3)
    print(json.dumps(summary, indent=2))  # noqa: T201 - the benchmark's output


if __name__ == "__main__":
    main()
