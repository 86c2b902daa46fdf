"""The schema: tables, their migrations, and bringing a database to the current revision."""
