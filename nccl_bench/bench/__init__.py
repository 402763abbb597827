"""bench: nccl-tests' *_perf for every collective. The command (parse, check the sizes fit, confirm the
algorithm), its options, the ranks' sweep per init mode and algorithm (worker), nccl-tests' text table,
the communicator split (--split); which algorithm NCCL ran is asked of NCCL itself (comm.algorecorder).
May import the shared layers (core, records, comm, job, measure); never another feature."""
