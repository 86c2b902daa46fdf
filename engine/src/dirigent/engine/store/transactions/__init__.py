"""Transactions that move state: creating runs, claiming and recording attempts, progress,
retries, triggers, alerts, definitions. Each function runs inside the caller's transaction."""
