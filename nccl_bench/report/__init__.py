"""report: reading results back. Readers for every result kind (ours and nccl-tests'),
run-to-run comparison and the report's figures. May import core and engine; never health's
checks, job or commands."""
