"""The ``agilerl`` command line: ``agilerl validate|show|schema|train ...``."""
