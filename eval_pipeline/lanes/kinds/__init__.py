"""One module per lane kind; each registers itself with ``register_lane_kind``."""
