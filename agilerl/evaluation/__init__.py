"""Using a trained agent: load it from a run, a checkpoint or an agent file, and play
greedy episodes in a plain environment (``agilerl evaluate``).

* :mod:`~agilerl.evaluation.source`: ``RUN_OR_ELITE`` -> the agent and its run's manifest;
* :mod:`~agilerl.evaluation.environment`: the plain env to play in (render modes checked);
* :mod:`~agilerl.evaluation.episodes`: the episodes and their statistics;
* :mod:`~agilerl.evaluation.video`: recording the frames.
"""

from agilerl.evaluation.episodes import Episode, Summary, play, summarise
from agilerl.evaluation.source import Source, SourceError, load_source

__all__ = ["Episode", "Source", "SourceError", "Summary", "load_source", "play", "summarise"]
