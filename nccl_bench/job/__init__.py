"""job: the machinery that runs a command as a job of ranks. Argument parsing that answers
bad input in one line and the job runner (cli), the options every job shares, the job's own
TCPStore and barriers, library logs per rank, and a command run as a bounded child job
(jobs). May import core and comm; never engine, health, report or commands."""
