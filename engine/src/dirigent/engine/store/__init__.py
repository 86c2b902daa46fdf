"""The engine's store: every line of SQL in dirigent lives under this package.

- ``schema``: the tables, their Alembic migrations, and migrating a database;
- ``transactions``: the statements that move state (runs, attempts, triggers, alerts, ...),
  each run inside a transaction its caller opens;
- ``queries``: the reads behind the views, the API and the worker's reference resolving;
- ``pool`` (connections and transactions), ``named`` (statements with named parameters) and
  ``leases`` (the one lease helper every leased queue uses).
"""
