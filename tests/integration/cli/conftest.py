"""Fixtures for CLI tests: ``state``, the state folder of a ``dirigent dev`` under test."""

from __future__ import annotations

from tests.support.dev import state

__all__ = ["state"]
