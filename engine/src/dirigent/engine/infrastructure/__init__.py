"""The infrastructure: what the engine stands on that is neither a rule nor SQL.

Settings, logging and metrics, the plugin host (blocks discovered by entry points), artifact
storage, secret sealing, and the embedded PostgreSQL process used by tests and ``dirigent
dev``. Nothing here reads or writes the engine's tables.
"""
