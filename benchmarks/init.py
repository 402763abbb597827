"""Communicator init latency per init mode, ranks per root and phase (nccl_bench init): median seconds."""
from nccl_bench.asv import suite as asvsuite


class InitLatency:
    params = (list(asvsuite.MODES), list(asvsuite.RANKS_PER_ROOT), list(asvsuite.PHASES))
    param_names = ["init", "ranks_per_root", "phase"]
    timeout = 60

    def setup_cache(self):
        return asvsuite.init_cache()

    setup_cache.timeout = asvsuite.INIT_BUDGET

    def setup(self, cache, init, ranks_per_root, phase):
        self.seconds = asvsuite.init_phase(cache, init, ranks_per_root, phase)

    def track_median(self, cache, init, ranks_per_root, phase):
        return self.seconds

    track_median.unit = "seconds"
