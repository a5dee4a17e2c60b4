"""A training package of the project (not installed): model and trainer."""
