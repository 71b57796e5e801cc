"""Small preference and SFT datasets the tests write (no downloads), with patterns a tiny
character-level model learns in a few dozen updates."""

from __future__ import annotations

import random
from pathlib import Path


def _prompts(rows: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"Q{rng.randint(10, 99)}?" for _ in range(rows)]


def write_preference_set(folder: Path, rows: int = 48, seed: int = 0,
                         name: str = "prefs.parquet") -> Path:
    """``prompt``/``chosen``/``rejected`` Parquet rows: the chosen answer always reads
    ``yes``, the rejected one ``no``."""
    import pandas as pd

    prompts = _prompts(rows, seed)
    frame = pd.DataFrame({"prompt": prompts, "chosen": [" yes" for _ in prompts],
                          "rejected": [" no" for _ in prompts]})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    frame.to_parquet(path)
    return path


def write_sft_set(folder: Path, rows: int = 48, seed: int = 1, response_column: str = "response",
                  name: str = "sft.parquet") -> Path:
    """``prompt``/response Parquet rows: the response repeats the prompt's number as
    ``A<n>.``."""
    import pandas as pd

    prompts = _prompts(rows, seed)
    frame = pd.DataFrame({"prompt": prompts,
                          response_column: [f" A{p[1:3]}." for p in prompts]})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    frame.to_parquet(path)
    return path
