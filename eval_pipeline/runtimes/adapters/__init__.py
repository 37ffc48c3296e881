"""One module per runtime scheme; each registers its factory with ``register_runtime``."""
