"""LLM fine-tuning: datasets, environments, losses and the adapter population.

Everything here needs the ``llm`` extra (``pip install 'agilerl[llm]'``); the modules import
``datasets``, ``transformers`` and ``peft`` only when they are used, so ``import agilerl``
keeps working without it.
"""
