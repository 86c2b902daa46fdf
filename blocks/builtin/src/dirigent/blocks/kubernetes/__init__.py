"""Kubernetes for blocks: an event-loop-safe, rate-limited API client and ``docker.run``."""
