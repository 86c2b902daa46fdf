"""The door: ``Engine`` and its facets, and the orchestrations they run.

Every process reaches the engine through ``dirigent.engine.Engine`` (built here) and nothing
below it. The facets are cut by resource the way the REST API's routers are: manifests,
pipelines, runs, events, triggers, connections, workers, system.
"""
