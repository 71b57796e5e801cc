"""GRPO on the same task and model through agilerl and TRL's GRPOTrainer, in one run.

    python bench/llm_trl.py [--steps 8] [--hidden 512] [--layers 8] [--skip-trl]

A Llama-style model (random weights, ``--hidden``/``--layers``) and the token task (emit
a given character; reward = share of the first 8 completion characters equal to it) are
built locally. Each configuration runs in a fresh process: TRL ``GRPOTrainer`` with one
LoRA model, agilerl GRPO with a population of 1 and of 4 LoRA adapters over one shared base.
Same LoRA config, prompts per step, group size, completion length, temperature, beta and
learning rate. After one warm-up step, ``--steps`` optimizer steps are timed (per member)
and reported as generated tokens/s and optimizer steps/s, and as tokens per CPU-second of
the process (both sides run one torch thread, so on a shared machine this is the steadier
figure); ``--repeat`` interleaves whole sets and compares medians; peak RSS is the process's
maximum resident memory, and ``over base`` subtracts the resident memory measured after
importing the libraries (before the model is loaded). Targets: agilerl pop 1 >= TRL throughput; agilerl
pop 4 peak memory <= 1.5x pop 1. Needs the ``[llm]`` extra and ``trl`` (not a dependency of
agilerl: ``pip install trl``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

PROMPTS_PER_STEP = 4
GROUP = 4
COMPLETION = 16
LR = 1e-3
LORA = {"lora_r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
        "lora_dropout": 0.0, "task_type": "CAUSAL_LM"}


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ours(model: Path, task: Path, pop: int, steps: int, beta: float) -> dict[str, Any]:
    from agilerl.training.paradigms import paradigm
    from agilerl.training.trainer import LocalTrainer

    manifest = {
        "algorithm": {"name": "GRPO", "batch_size": PROMPTS_PER_STEP, "group_size": GROUP,
                      "lr": LR, "beta": beta, "max_output_tokens": COMPLETION,
                      "temperature": 1.0, "gradient_checkpointing": False},
        "environment": {"env_type": "reasoning", "dataset": str(task),
                        "reward_file_path": str(task.parent / "reward.py"),
                        "reward_fn_name": "emit_token", "prompt_template": {"user_1": "{question}"},
                        "max_reward": 1.0, "train_test_split": 0.75},
        "training": {"max_steps": steps + 1, "evo_steps": steps + 1, "pop_size": pop},
        "network": {"pretrained_model_name_or_path": str(model), "max_context_length": 128,
                    "lora_config": LORA},
    }
    trainer = LocalTrainer.from_manifest(manifest, seed=0)
    train = paradigm(trainer.paradigm).member_trainer(trainer)
    tokens = seconds = cpu = 0.0
    for agent in trainer.population:
        train(agent, 1, seed=0)  # warm-up
        start, start_cpu = time.perf_counter(), time.process_time()
        report = train(agent, steps, seed=1)
        seconds += time.perf_counter() - start
        cpu += time.process_time() - start_cpu
        tokens += report.metrics["completion_length"] * PROMPTS_PER_STEP * GROUP * steps
    return {"tokens_per_s": tokens / seconds, "steps_per_s": pop * steps / seconds,
            "tokens_per_cpu_s": tokens / cpu, "reward": report.metrics["reward"]}


def _trl(model: Path, task: Path, steps: int, beta: float) -> dict[str, Any]:
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(model)
    data = load_dataset("parquet", data_files=str(task), split="train")
    data = data.map(lambda row: {"prompt": [{"role": "user", "content": row["question"]}]})

    def reward(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [sum(ch == a for ch in t[:8]) / 8.0 for t, a in zip(texts, answer, strict=True)]

    marks: list[tuple[float, float, dict[str, float]]] = []

    class Clock(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **kwargs: Any) -> None:
            if logs and "completions/mean_length" in logs:
                marks.append((time.perf_counter(), time.process_time(), dict(logs)))

    rows = PROMPTS_PER_STEP * GROUP
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(), per_device_train_batch_size=rows,
        num_generations=GROUP, generation_batch_size=rows, max_completion_length=COMPLETION,
        max_steps=steps + 1, learning_rate=LR, beta=beta, temperature=1.0, top_k=0, top_p=1.0,
        use_cpu=True, report_to=[], logging_steps=1, save_strategy="no", seed=0,
        gradient_checkpointing=False, bf16=False, disable_dropout=True, lr_scheduler_type="constant",
    )
    trainer = GRPOTrainer(model=str(model), reward_funcs=reward, args=config,
                          train_dataset=data, processing_class=tokenizer,
                          peft_config=LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                                                 target_modules=LORA["target_modules"],
                                                 task_type="CAUSAL_LM"),
                          callbacks=[Clock()])
    trainer.train()
    (first, first_cpu, _), (last, last_cpu, _) = marks[0], marks[-1]
    timed = marks[1:]
    tokens = sum(logs["completions/mean_length"] * rows for _, _, logs in timed)
    return {"tokens_per_s": tokens / (last - first), "steps_per_s": len(timed) / (last - first),
            "tokens_per_cpu_s": tokens / (last_cpu - first_cpu),
            "reward": timed[-1][2].get("reward", float("nan"))}


def child(args: argparse.Namespace) -> None:
    import datasets  # noqa: F401  (imported before the baseline: it is not the model)
    import peft  # noqa: F401
    import torch
    import transformers  # noqa: F401

    if args.child == "trl":
        import trl  # noqa: F401
    else:
        import agilerl.training.llm  # noqa: F401
    torch.set_num_threads(1)
    base_rss = _rss_mb()
    model, task = Path(args.model), Path(args.task)
    result = _trl(model, task, args.steps, args.beta) if args.child == "trl" else \
        _ours(model, task, args.pop, args.steps, args.beta)
    result.update(peak_mb=_peak_mb(), base_mb=base_rss)
    print("RESULT " + json.dumps(result), flush=True)


def _run(kind: str, pop: int, model: Path, task: Path, steps: int,
         beta: float) -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO), "WANDB_MODE": "disabled", "TQDM_DISABLE": "1"}
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--pop", str(pop), "--model", str(model),
         "--task", str(task), "--steps", str(steps), "--beta", str(beta)],
        env=env, capture_output=True, text=True, timeout=3600)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    raise RuntimeError(f"{kind} pop {pop} failed:\n{done.stderr[-3000:]}")


def _row(label: str, r: dict[str, Any]) -> str:
    return (f"  {label:<18} {r['tokens_per_s']:>9.1f} {r['steps_per_s']:>8.3f} "
            f"{r['tokens_per_cpu_s']:>9.1f} {r['peak_mb']:>8.0f} "
            f"{r['peak_mb'] - r['base_mb']:>9.0f}")


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--beta", type=float, default=0.0,
                        help="KL coefficient on both sides (> 0 adds the reference pass)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the whole set this many times, interleaved; ratios of medians")
    parser.add_argument("--skip-trl", action="store_true")
    parser.add_argument("--child", choices=["ours", "trl"])
    parser.add_argument("--pop", type=int, default=1)
    parser.add_argument("--model")
    parser.add_argument("--task")
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    from agilerl.llm.tiny import build_tiny_model, write_token_task

    folder = Path(tempfile.mkdtemp(prefix="llm-bench-"))
    model = build_tiny_model(folder / "model", hidden_size=args.hidden, layers=args.layers,
                             heads=max(args.hidden // 64, 2), max_positions=256)
    task = write_token_task(folder / "task", rows=64)
    params = sum(p.numel() for p in __import__("safetensors.torch", fromlist=["load_file"])
                 .load_file(str(model / "model.safetensors")).values())
    print(f"model: {params / 1e6:.1f}M parameters (hidden {args.hidden}, {args.layers} layers); "
          f"{PROMPTS_PER_STEP} prompts x {GROUP} completions x {COMPLETION} tokens per step; "
          f"beta {args.beta:g}; load: {os.getloadavg()[0]:.2f}")
    print(f"  {'run':<18} {'tokens/s':>9} {'steps/s':>8} {'tok/CPU-s':>9} {'peak MB':>8} "
          f"{'over base':>9}")
    rows = [("agilerl pop 1", "ours", 1), ("agilerl pop 4", "ours", 4)]
    if not args.skip_trl:
        rows.insert(0, ("TRL GRPOTrainer", "trl", 1))
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in rows}
    for _ in range(max(args.repeat, 1)):
        for label, kind, pop in rows:
            r = _run(kind, pop, model, task, args.steps, args.beta)
            results[label].append(r)
            print(_row(label, r), f"(load {os.getloadavg()[0]:.1f})", flush=True)
    one, four = results["agilerl pop 1"], results["agilerl pop 4"]
    over = [(f["peak_mb"] - f["base_mb"]) / (o["peak_mb"] - o["base_mb"])
            for o, f in zip(one, four, strict=True)]
    print(f"pop 4 / pop 1 peak memory: {_median(four, 'peak_mb') / _median(one, 'peak_mb'):.2f}x "
          f"(over base {statistics.median(over):.2f}x); load after: {os.getloadavg()[0]:.2f}")
    if "TRL GRPOTrainer" in results:
        trl = results["TRL GRPOTrainer"]
        ratio = {key: _median(one, key) / _median(trl, key)
                 for key in ("tokens_per_s", "steps_per_s", "tokens_per_cpu_s")}
        print(f"agilerl / TRL throughput (pop 1, medians of {len(trl)}): tokens "
              f"{ratio['tokens_per_s']:.2f}x, steps {ratio['steps_per_s']:.2f}x, tokens per "
              f"CPU-second {ratio['tokens_per_cpu_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
