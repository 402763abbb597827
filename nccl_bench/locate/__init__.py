"""locate: which GPU, link or node drags collectives down. The command, point-to-point between every
pair (pairs), bisection by halves (halves) and the suspects named from both (suspects). May import the
shared layers (core, records, comm, job, measure); never another feature."""
