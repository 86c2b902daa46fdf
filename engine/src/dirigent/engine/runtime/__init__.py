"""The runtime: the worker loop, step progression, reference resolution, the step context."""
