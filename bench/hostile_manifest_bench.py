"""Time to refuse hostile manifests: a "billion laughs" alias bomb (10^9 values once
expanded), a self-referencing alias, and a file just over the 1 MiB limit. Target: each is
refused in well under a second, in process and as a fresh ``agilerl validate`` command.

Usage: python bench/hostile_manifest_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agilerl.core.manifest_errors import ManifestError
from agilerl.models.loading import MAX_MANIFEST_BYTES, load_file

LAUGHS = "\n".join(
    [f'l0: &l0 [{", ".join(["lol"] * 10)}]']
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
) + "\nalgorithm: {name: DQN}\nenvironment: {name: CartPole-v1}\n"
CASES = {
    "billion_laughs.yaml": LAUGHS,
    "self_reference.yaml": "algorithm: &a\n  name: DQN\n  again: *a\nenvironment: {name: x}\n",
    "oversize.yaml": "algorithm: {name: DQN}\n" + "# padding\n" * (MAX_MANIFEST_BYTES // 10 + 1),
}


def in_process(file: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            load_file(file)
        except ManifestError:
            pass
        else:
            raise SystemExit(f"{file.name} was accepted")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cold_command(file: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "agilerl.cli", "validate", "-q", str(file)],
                                capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if result.returncode != 1 or "Traceback" in result.stderr:
            raise SystemExit(f"{file.name}: exit {result.returncode}\n{result.stderr}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for name, text in CASES.items():
            file = Path(folder) / name
            file.write_text(text)
            warm = in_process(file, args.repeat)
            cold = cold_command(file, args.repeat)
            print(f"{name:22s} in process {warm * 1000:8.2f} ms   "
                  f"agilerl validate {cold * 1000:8.1f} ms (median of {args.repeat})")


if __name__ == "__main__":
    main()
