"""job: the machinery that runs a command as a job of ranks. The shared arguments, answering bad input in
one line (cli), the job runner (runner), the options every job shares, the job's own TCPStore and
barriers, library logs per rank, the self-launch and its reaping, and a command run as a bounded child job
(jobs). May import core, records and comm; never measure, stress, a feature or commands."""
