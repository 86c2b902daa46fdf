"""dirigent.engine — manifest models, validation, store, runtime and plugin host."""
