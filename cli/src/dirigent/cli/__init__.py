"""dirigent.cli — the dirigent command."""
