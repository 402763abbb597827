"""accept: is this node fit for the fleet? The accept command (each step a bounded job, judged against a
profile: verdicts), doctor and its checks (check, gpuchecks, hostchecks, xid, rankchecks), smoke, info and
the stale-key probe; which profile judges the node (selection), expectations derived from its topology
(topology, derive) and a golden node's baseline (golden). May import the shared layers and stress (its short
run); never another feature."""
