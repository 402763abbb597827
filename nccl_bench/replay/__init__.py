"""replay: a real job's communication, run here and judged against the job. What it reads (traces: Flight
Recorder dumps, frdump; profiler traces, kineto; our workload file, workloadfile) into one neutral
sequence (workload), the ranks that replay it (worker) and its rows and verdict (rows). May import the
shared layers (core, records, comm, job, measure); never another feature. frdump reads one dump, frgroups the job across
its dumps; bounds says what a replay may start and bounded how much of a file is read."""
