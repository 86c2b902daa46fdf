"""dirigent.api — the REST API."""
