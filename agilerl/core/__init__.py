"""The ground floor: errors, space helpers and the facts every other package reads.

Everything in ``agilerl`` may import from here; nothing here imports from the rest of
``agilerl``, so this package never takes part in an import cycle.
"""
