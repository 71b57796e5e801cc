"""A tiny causal language model and a character-level tokenizer, built locally.

Tests and benchmarks need a model that loads like any Hugging Face checkpoint without
downloading one: :func:`build_tiny_model` writes a randomly initialised Llama-style model
(a few layers, a vocabulary of printable ASCII characters) and its tokenizer, with a chat
template, to a folder that ``network.pretrained_model_name_or_path`` can point at. The
``*_rows`` and ``write_*`` functions make small local datasets with patterns such a model
learns in a few dozen updates (a character to emit, Countdown sums, preference and SFT
pairs); ``agilerl llm tiny-model`` (:mod:`agilerl.llm.starter`) writes them all at once.
"""

from __future__ import annotations

import json
import os
import random
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

#: Special tokens of the tiny tokenizer (pad first so its id is 0).
SPECIAL_TOKENS = ("<pad>", "<unk>", "<bos>", "<eos>", "<|im_start|>", "<|im_end|>")

#: A ChatML-style template: ``apply_chat_template`` renders prompt_template messages with it.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "{% if not (loop.last and message['role'] == 'assistant' and continue_final_message) %}"
    "<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def char_vocabulary() -> dict[str, int]:
    """Special tokens, then every printable ASCII character, one id each."""
    chars = [c for c in string.printable if c not in "\x0b\x0c\r"]
    tokens = list(SPECIAL_TOKENS) + chars
    return {token: i for i, token in enumerate(tokens)}


def build_tokenizer(corpus: Sequence[str] = (), vocab_size: int = 384
                    ) -> PreTrainedTokenizerFast:
    """A ``PreTrainedTokenizerFast`` with pad/eos/bos and a chat template.

    Without ``corpus`` it is character-level (every printable ASCII character one token).
    With ``corpus`` it is a byte-pair tokenizer trained on that text (locally, in
    milliseconds) up to ``vocab_size`` tokens, whose words become single tokens, so long
    prompts of real manifests fit their ``max_context_length``; every printable character
    stays a token.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    vocab = char_vocabulary()
    if corpus:
        core = Tokenizer(models.BPE(unk_token="<unk>"))
        core.pre_tokenizer = pre_tokenizers.Split(Regex(r" ?[A-Za-z]+|[\s\S]"),
                                                  behavior="isolated")
        trainer = trainers.BpeTrainer(
            vocab_size=max(vocab_size, len(vocab)), special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=[t for t in vocab if t not in SPECIAL_TOKENS], show_progress=False)
        core.train_from_iterator(list(corpus), trainer=trainer)
    else:
        core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>",
        eos_token="<eos>", additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.padding_side = "left"
    return tokenizer


def build_tiny_model(
    folder: str | os.PathLike[str],
    *,
    hidden_size: int = 32,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 1024,
    init_range: float = 0.2,
    seed: int = 0,
    corpus: Sequence[str] = (),
) -> Path:
    """Write a tiny Llama-style causal LM and its tokenizer to ``folder``; return it.

    The attention projections are named ``q_proj``/``k_proj``/``v_proj``/``o_proj`` as in
    Qwen and Llama checkpoints, so LoRA ``target_modules`` of real manifests apply unchanged.
    ``corpus``: text to train a byte-pair tokenizer on (see :func:`build_tokenizer`;
    default: character-level). ``init_range`` (the weights' standard deviation) is larger than a real model's 0.02 so
    that the next-token distribution is not nearly uniform and a LoRA adapter can sharpen it.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer(corpus)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2), max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True,
        initializer_range=init_range,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# ---------------------------------------------------------------------- local tasks
#: Rewards a tiny model can learn: the share of the first 8 completion characters that are
#: the answer character (1.0 = eight of them), or that are lowercase letters.
TOKEN_TASK_REWARD = '''
def emit_token(completion, answer):
    """Share of the first 8 characters of the completion equal to the answer character."""
    return sum(ch == str(answer) for ch in completion[:8]) / 8.0


def lowercase_share(completion):
    """Share of the first 8 characters that are lowercase letters (a dense reward: about a
    quarter for a random model, so every batch has a learning signal)."""
    return sum(ch.islower() for ch in completion[:8]) / 8.0
'''

#: A Countdown reward in the shape of the reference example: format plus a correct equation.
COUNTDOWN_REWARD = '''
import ast
import re


def _value(node):
    if isinstance(node, ast.Expression):
        return _value(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left, right = _value(node.left), _value(node.right)
        ops = {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}
        if isinstance(node.op, ast.Div):
            return left / right
        return ops[type(node.op)]
    raise ValueError("not arithmetic")


def format_reward(completion):
    return 1.0 if re.search(r"</redacted_thinking>.*<answer>.*</answer>", completion, re.S) else 0.0


def equation_reward(completion, nums, target):
    found = re.search(r"<answer>(.*?)</answer>", completion, re.S)
    if not found:
        return 0.0
    equation = found.group(1).strip()
    used = sorted(int(n) for n in re.findall(r"\\d+", equation))
    if used != sorted(int(n) for n in nums):
        return 0.0
    try:
        return 1.0 if abs(_value(ast.parse(equation, mode="eval")) - float(target)) < 1e-5 else 0.0
    except (ValueError, SyntaxError, ZeroDivisionError):
        return 0.0


def combined_rewards(completion, solution, prompt):
    return format_reward(completion) + equation_reward(completion, prompt, solution)
'''


def write_records(path: str | os.PathLike[str], records: Sequence[Mapping[str, object]]
                  ) -> Path:
    """Write ``records`` to ``path``: JSON lines for ``.jsonl`` (readable, byte-for-byte
    the same for the same records), else Parquet; creates the folder; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix == ".jsonl":
        target.write_text("".join(json.dumps(record) + "\n" for record in records))
        return target
    from datasets import Dataset

    Dataset.from_list(list(records)).to_parquet(str(target))
    return target


def write_token_task(folder: str | os.PathLike[str], rows: int = 32, answer: str = "7") -> Path:
    """A Parquet dataset (``question``, ``answer``: the character to emit) and ``reward.py``
    (``emit_token``) in ``folder``; returns the dataset file."""
    path = Path(folder)
    write_records(path / "token_task.parquet",
                  [{"question": f"Say {answer} ({i})", "answer": answer} for i in range(rows)])
    (path / "reward.py").write_text(TOKEN_TASK_REWARD)
    return path / "token_task.parquet"


class CountdownRow(TypedDict):
    """A row of :func:`countdown_rows`."""

    nums: list[int]
    target: int


def countdown_rows(rows: int = 24, seed: int = 0) -> list[CountdownRow]:
    """Countdown rows (``nums``: three or four numbers from 1 to 20, ``target``: their sum,
    so every row has a solution using each number once)."""
    rng = random.Random(seed)
    records: list[CountdownRow] = []
    for _ in range(rows):
        nums = [rng.randint(1, 20) for _ in range(rng.choice((3, 4)))]
        records.append({"nums": nums, "target": sum(nums)})
    return records


def write_countdown_task(folder: str | os.PathLike[str], rows: int = 24, seed: int = 0) -> Path:
    """A Countdown-style Parquet dataset (``nums``, ``target``, as the reference's
    Countdown-Tasks-3to4) and ``reward.py`` (``combined_rewards``); returns the dataset."""
    path = Path(folder)
    write_records(path / "countdown.parquet", countdown_rows(rows, seed))
    (path / "reward.py").write_text(COUNTDOWN_REWARD)
    return path / "countdown.parquet"


def _short_prompts(rows: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"Q{rng.randint(10, 99)}?" for _ in range(rows)]


def preference_rows(rows: int = 48, seed: int = 0) -> list[dict[str, str]]:
    """``prompt``/``chosen``/``rejected`` rows a tiny character-level model learns in a few
    dozen DPO updates: the chosen answer always reads `` yes``, the rejected one `` no``."""
    return [{"prompt": p, "chosen": " yes", "rejected": " no"}
            for p in _short_prompts(rows, seed)]


def sft_rows(rows: int = 48, seed: int = 1,
             response_column: str = "response") -> list[dict[str, str]]:
    """``prompt``/response rows: the response repeats the prompt's number (``Q42?`` ->
    `` A42.``), a pattern a tiny model learns in a few dozen SFT updates."""
    return [{"prompt": p, response_column: f" A{p[1:3]}."} for p in _short_prompts(rows, seed)]


def write_preference_set(folder: str | os.PathLike[str], rows: int = 48, seed: int = 0,
                         name: str = "prefs.parquet") -> Path:
    """:func:`preference_rows` as ``folder/name`` (Parquet, or JSON lines for ``.jsonl``)."""
    return write_records(Path(folder) / name, preference_rows(rows, seed))


def write_sft_set(folder: str | os.PathLike[str], rows: int = 48, seed: int = 1,
                  response_column: str = "response", name: str = "sft.parquet") -> Path:
    """:func:`sft_rows` as ``folder/name`` (Parquet, or JSON lines for ``.jsonl``)."""
    return write_records(Path(folder) / name, sft_rows(rows, seed, response_column))
