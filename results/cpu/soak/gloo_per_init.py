"""What torch's ProcessGroupGloo keeps per create/destroy, with no code of nccl-bench: one process,
world size 1, a HashStore (no network, no store server), RSS read every 100 groups.

    python results/cpu/soak/gloo_per_init.py                 # a new group per iteration, one allreduce
    python results/cpu/soak/gloo_per_init.py --no-collective # the group alone
    python results/cpu/soak/gloo_per_init.py --one-group     # one group, one allreduce per iteration
    TORCH_FR_BUFFER_SIZE=0 python ... --threads 1            # flight recorder off, one worker thread

Prints the RSS slope in bytes per iteration over each fifth of the run: growth that levels off
(a bounded buffer filling) shows as a falling slope, memory kept for good as a steady one.
"""
import argparse
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist


def rss() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * 4096


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("-n", type=int, default=20_000)
    p.add_argument("--threads", type=int, default=2, help="gloo worker threads per group (torch's default: 2)")
    p.add_argument("--no-collective", action="store_true")
    p.add_argument("--one-group", action="store_true")
    a = p.parse_args()
    device = dist.ProcessGroupGloo.create_default_device()

    def group():
        o = dist.ProcessGroupGloo._Options()
        o._timeout, o._devices, o._threads = timedelta(seconds=30), [device], a.threads
        return dist.ProcessGroupGloo(dist.HashStore(), 0, 1, o)

    t, samples, pg = torch.ones(4), [], group()
    for i in range(a.n):
        if not a.one_group:
            pg = group()
        if not a.no_collective:
            pg.allreduce([t]).wait()
        if i % 100 == 0:
            samples.append((i, rss()))
    s = np.array(samples, float)
    k = len(s) // 5
    fifths = [np.polyfit(s[j * k:(j + 1) * k, 0], s[j * k:(j + 1) * k, 1], 1)[0] for j in range(5)]
    print(f"torch {torch.__version__}, {a.n} iterations: B per iteration by fifth:",
          " ".join(f"{v:.0f}" for v in fifths))


if __name__ == "__main__":
    main()
