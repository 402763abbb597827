"""engine: what is measured and how. The table of collectives (one small record each), the
sweep plan and the one sweep engine, the only timer, communicator split, the bench -J file
and table, NCCL's algorithm choice read from its log, and the scale model of the ID exchange
(simulate). May import core, comm and job; never health, report or commands."""
