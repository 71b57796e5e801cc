"""agilerl."""
