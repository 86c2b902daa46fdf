"""Read queries: what the views, the API, the console and the worker's references read.

Nothing here writes. Each read is a bounded, indexed statement that returns view shapes."""
