"""Arena server figures: submit latency, time to first log line, server memory.

    .venv/bin/python bench/arena_bench.py [--requests 200] [--concurrency 50] [--rounds 3]
                                          [--first-log-runs 3]

Starts ``arena-server serve`` on a random loopback port in a temporary data folder and
measures, over real HTTP:

* submit latency (p50/p99) with 1 client and with ``--concurrency`` concurrent clients;
  jobs run ``sleep`` in one slot so the queue grows but workers barely use the CPU;
* time from the start of a submit to the first log line a follower receives, on an idle
  server, for a worker that prints one line (the server's own overhead) and for a tiny
  DQN/CartPole run of the real trainer (``python -m agilerl.train``);
* server RSS idle and with 50 queued jobs (the server process only, not its workers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from agilerl.arena.server.testing import create_token, server_process

SUBMIT = "/api/cli/v1/experiments/jobs/submit"
LOGS = "/api/cli/v1/experiments/jobs/logs"
SLEEPER = f"{sys.executable} -c 'import time; time.sleep(3600)'"


def manifest(max_steps: int = 200) -> dict[str, Any]:
    return {
        "algorithm": {"name": "DQN", "batch_size": 16, "lr": 0.001, "learn_step": 1},
        "environment": {"name": "CartPole-v1", "num_envs": 1},
        "training": {"max_steps": max_steps, "evo_steps": 100, "pop_size": 1,
                     "learning_delay": 0},
        "replay_buffer": {"max_size": 1000},
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _submit_many(base: str, token: str, total: int, concurrency: int) -> list[float]:
    latencies: list[float] = []
    counter = iter(range(total))
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits,
                                 headers={"Authorization": f"Bearer {token}"}) as client:

        async def worker() -> None:
            for _ in counter:
                start = time.perf_counter()
                resp = await client.post(SUBMIT, json={"manifest": manifest()})
                latencies.append(time.perf_counter() - start)
                if resp.status_code != 200:
                    raise RuntimeError(f"submit failed: {resp.status_code} {resp.text}")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def bench_submit(requests: int, concurrency: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        token = create_token(data, "bench")
        args = ("--slots", "1", "--job-command", SLEEPER, "--max-active-jobs", "1000000")
        with server_process(data, *args) as (base, proc):
            time.sleep(1.0)
            out["rss_idle_mb"] = rss_mb(proc.pid)
            asyncio.run(_submit_many(base, token, 51, 1))  # 1 running + 50 queued
            time.sleep(0.5)
            out["rss_50_queued_mb"] = rss_mb(proc.pid)
            asyncio.run(_submit_many(base, token, 20, 1))  # warm-up
            for clients in (1, concurrency):
                per_round = [asyncio.run(_submit_many(base, token, requests, clients))
                             for _ in range(rounds)]
                lat = [x for r in per_round for x in r]
                out[f"submit_{clients}"] = {
                    "n": len(lat), "p50_ms": 1000 * statistics.median(lat),
                    "p99_ms": 1000 * pct(lat, 0.99),
                    "rounds_p99_ms": [1000 * pct(r, 0.99) for r in per_round],
                    "throughput_per_s": len(lat) / (sum(lat) / clients)}
            out["rss_after_mb"] = rss_mb(proc.pid)
            out["jobs_recorded"] = len(httpx.get(
                f"{base}/api/cli/v1/experiments/list",
                headers={"Authorization": f"Bearer {token}"}, timeout=60).json()["data"])
    return out


ECHO = f"{sys.executable} -c 'print(\"ready\")'"


def bench_first_log(runs: int, *server_args: str) -> list[float]:
    times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        token = create_token(data, "bench")
        headers = {"Authorization": f"Bearer {token}"}
        with server_process(data, "--slots", "1", *server_args) as (base, _):
            for i in range(runs):
                name = f"first-log-{i}"
                start = time.perf_counter()
                resp = httpx.post(f"{base}{SUBMIT}", headers=headers, timeout=60,
                                  json={"manifest": manifest(), "experiment_name": name})
                resp.raise_for_status()
                with httpx.stream("GET", f"{base}{LOGS}", headers=headers, timeout=300,
                                  params={"experiment_name": name, "follow": "true"}) as s:
                    for line in s.iter_lines():
                        if line.strip() and json.loads(line).get("kind") == "log":
                            times.append(time.perf_counter() - start)
                            break
                # let the run finish so the next one starts on an idle server
                with httpx.stream("GET", f"{base}{LOGS}", headers=headers, timeout=300,
                                  params={"experiment_name": name, "follow": "true"}) as s:
                    for _ in s.iter_lines():
                        pass
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per client count")
    parser.add_argument("--first-log-runs", type=int, default=3)
    args = parser.parse_args()

    sub = bench_submit(args.requests, args.concurrency, args.rounds)
    for clients in (1, args.concurrency):
        row = sub[f"submit_{clients}"]
        rounds = ", ".join(f"{x:.0f}" for x in row["rounds_p99_ms"])
        print(f"submit latency, {clients:>2} client(s): p50 {row['p50_ms']:.1f} ms, "
              f"p99 {row['p99_ms']:.1f} ms (n={row['n']}; p99 per round: {rounds} ms; "
              f"~{row['throughput_per_s']:.0f} submits/s)")
    print(f"server RSS: idle {sub['rss_idle_mb']:.1f} MB, with 50 queued jobs "
          f"{sub['rss_50_queued_mb']:.1f} MB, after {sub['jobs_recorded']} jobs "
          f"{sub['rss_after_mb']:.1f} MB")
    echo = bench_first_log(10, "--job-command", ECHO)
    print(f"submit -> first log line (worker = python printing one line): median "
          f"{1000 * statistics.median(echo):.0f} ms, max {1000 * max(echo):.0f} ms (n=10)")
    first = bench_first_log(args.first_log_runs)
    print(f"submit -> first log line (real trainer, tiny DQN/CartPole): median "
          f"{statistics.median(first):.2f} s, min {min(first):.2f} s, max {max(first):.2f} s "
          f"(n={len(first)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
