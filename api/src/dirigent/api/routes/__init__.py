"""The API's routers, one module per resource; ``dirigent.api.app`` assembles them."""
