"""Bandwidth per collective, NCCL algorithm, init mode and size (nccl_bench bench, out-of-place).

time per operation is the regression signal (asv: lower is better, so a bandwidth drop
shows as a regression); busbw (GB/s, nccl-tests' formula) is tracked beside it for reading.
"""
from nccl_bench.asv import suite as asvsuite


class Bandwidth:
    params = (list(asvsuite.COLLECTIVES), list(asvsuite.ALGOS), list(asvsuite.MODES), list(asvsuite.SIZES))
    param_names = ["collective", "algo", "init", "size"]
    timeout = 60

    def setup_cache(self):
        return asvsuite.bandwidth_cache()

    setup_cache.timeout = asvsuite.BANDWIDTH_BUDGET

    def setup(self, cache, collective, algo, init, size):
        self.point = asvsuite.bandwidth_point(cache, collective, algo, init, size)

    def track_time_per_op(self, cache, collective, algo, init, size):
        return self.point["time_s"]

    track_time_per_op.unit = "seconds"

    def track_busbw(self, cache, collective, algo, init, size):
        return self.point["busbw_gbps"]

    track_busbw.unit = "GB/s"
