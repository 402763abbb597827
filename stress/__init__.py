"""`python -m stress` (`nccl-stress`): churn communicator re-inits under seeded skew; classify and explain
failures. A top-level package on nccl_bench's shared layers (core, records, comm, job, measure); nccl_bench's
features that run it (accept, info --probe, asv) import it where the layer test sees them.

- command (parse, check the journal, launch), options, inject (faults), schedule (seeded skew), plans
  (a round from the options);
- loop (the rounds on one rank), judged (one round lined up, run, gathered and judged), keeper (rank 0's
  journal, ledger and words), round (one round on a rank: skew, ID exchange, init, one verified collective,
  destroy), verify (its check, from nccl_bench.measure), record (one rank's record of a round);
- gather (every rank's record through the store), peers (is a silent rank alive), diagnose (verdicts and
  their explanation), inflight (destroys behind the rounds), storekeys (store keys of finished rounds,
  deleted), stall (a rank that stops progressing ends itself), stop (signals);
- journal (crash-safe, resumable) and journallock (one writer per journal), ledger and tally (rank 0's
  account of a run in O(1) memory), summary (progress line, final table), closing (how a run ends),
  baseline (bare init+destroy rate), failpoint (test-only kills).
"""
