def run_lane(cases, **kwargs):
    raise NotImplementedError
