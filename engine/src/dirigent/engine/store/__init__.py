"""The engine's store: every line of SQL in dirigent lives under this package.

Tables (`tables`), connections and migrations (`database`), the embedded server used by tests
and `dirigent dev` (`embedded`), and at-rest sealing of connection secrets (`crypto`).
"""
