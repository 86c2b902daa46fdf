"""dirigent.sdk — the block contract a third-party block imports."""
