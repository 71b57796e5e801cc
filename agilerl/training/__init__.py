"""Local training: the trainers, the generation loop and the per-paradigm member trainers.

``agilerl.training.trainer`` holds ``Trainer`` and ``LocalTrainer`` (``ArenaTrainer`` is
re-exported from ``agilerl.arena.trainer``); :mod:`agilerl.training.loop` is the generation
loop; :mod:`agilerl.training.paradigms` maps an algorithm's registry ``training_loop`` to
its member trainer; :mod:`agilerl.training.off_policy` / :mod:`agilerl.training.on_policy`
adapt the experience collectors of :mod:`agilerl.training.experience` to the population
seam; :mod:`agilerl.core.errors` holds what they all share (imports point one way).
"""
