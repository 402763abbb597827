"""measure: the measuring floor every feature stands on. The vocabulary of element types, reductions and
sizes; the table of collectives (one small record each) and what each one's result must be (datacheck);
the one timer (timing) and the one sweep engine (sweepplan, sweep); the bench row and its -J file
(benchfile); a GPU's copy bandwidth and error counters; hardware profiles (thresholds as data); init
rows summarised; leak verdicts. May import core, comm and job; never a feature, stress or commands."""
