"""core: facts and primitives every layer uses. Two tiers of errors and exit codes (errors),
deadlines, order statistics and streamed statistics, NVTX markers, who this process is under its launcher
(launch), what this machine is (sysinfo) and its GPUs' error counters (gpucounters), resources sampled over a
long run and their leak verdicts (resources, leaks), result files that are never overwritten (results), and the
libraries' private APIs this project uses, each with why (private).
Imports nothing else of nccl_bench; every other folder may import it."""
