"""dirigent.blocks — the built-in blocks, connection kinds and notifiers."""
