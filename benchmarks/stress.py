"""A short scoped churn of communicator re-inits (python -m stress --init scoped)."""
from nccl_bench.asv import suite as asvsuite


class ScopedChurn:
    timeout = 60

    def setup_cache(self):
        return asvsuite.stress_cache()

    setup_cache.timeout = asvsuite.STRESS_BUDGET

    def setup(self, cache):
        self.rate = asvsuite.stress_rate(cache)

    def track_seconds_per_round(self, cache):
        return 1.0 / self.rate

    track_seconds_per_round.unit = "seconds"

    def track_rounds_per_s(self, cache):
        return self.rate

    track_rounds_per_s.unit = "rounds/s"
