"""The shared test harness: what tests in more than one place (and e2e/) stand on.

- ``waiting``: the one way a test waits (a deadline, what it waits for, the last value seen);
- ``postgres``: the session's embedded PostgreSQL and a fresh migrated database per test;
- ``harness``: an engine under test, driven through its door (``Engine`` and its facets);
- ``servers``: loopback servers a test points the engine or a client at, and free ports;
- ``api``: the REST API served by a real uvicorn in front of an engine harness;
- ``dev``: a ``dirigent dev`` subprocess and the records it prints;
- ``s3kit``: the S3 tests' counting proxy, ambient credentials and ``s3`` Connections.

conftest files hold fixtures (and hooks) only, importing what they need from here.
"""
