"""The shapes: the values every door exchanges with the engine.

Manifests (the four kinds), views (what reads answer), problems (located refusals with dotted
codes), statuses, attempt shapes and what PostgreSQL can store. Pure Pydantic models and
dataclasses: nothing here touches the database or the runtime, so the API, the operator and
the CLI may import these modules directly (they are the engine's public shapes).
"""
