"""A word-level tokenizer built in memory (no downloads) for the preference/SFT unit tests."""

from __future__ import annotations

from typing import Any

WORDS = ["hello", "world", "good", "bad", "yes", "no", "say", "the", "answer", "is",
         *[f"p{i}" for i in range(40)], *[f"c{i}" for i in range(40)],
         *[f"r{i}" for i in range(40)]]


def word_tokenizer(bos: bool = True) -> Any:
    """A ``PreTrainedTokenizerFast`` over :data:`WORDS` with ``<pad>``, ``<bos>``, ``<eos>``
    and ``<unk>`` (ids 0..3); adds ``<bos>`` in front of text with special tokens if ``bos``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<pad>", "<bos>", "<eos>", "<unk>", *WORDS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    if bos:
        core.post_processor = processors.TemplateProcessing(
            single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<bos>",
                                   eos_token="<eos>", unk_token="<unk>")
