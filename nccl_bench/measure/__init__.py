"""measure: the measuring layer every feature stands on, and only measuring. The vocabulary of element types,
reductions and sizes; the table of collectives (one small record each) and what each one's result must be
(datacheck); the one timer (timing) and the one sweep engine (sweepplan, sweep); the tail of per-iteration
times; a GPU's copy bandwidth (copies). Result formats live in records, GPU counters and leak verdicts in core.
May import core, records, comm and job; never a feature, stress or commands."""
