"""core: facts and primitives every layer uses. Two tiers of errors and exit codes (errors),
deadlines, order statistics, NVTX markers, who this process is under its launcher (launch),
what this machine is (sysinfo) and result files with their one metadata block (results).
Imports nothing else of nccl_bench; every other folder may import it."""
