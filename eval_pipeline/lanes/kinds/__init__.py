"""Lane kinds in code, for lanes their declaration cannot say; each registers itself in LANE_KINDS."""
