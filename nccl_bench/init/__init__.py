"""init: what creating a communicator costs, phase by phase and per init mode (command), the ID exchange
of thousands of simulated ranks (scale), and a bare init loop for leak checks (leakloop). May import the
shared layers (core, records, comm, job, measure); never another feature."""
