"""dirigent.operator — the Kubernetes operator."""
