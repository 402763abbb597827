"""records: every result kind this project writes or reads, each defined once. A kind's schema (its
rows' fields, its version), its writer and its reader live here: bench (nccl-tests' -J layout, ours and
theirs), init, init-simulate, the stress journal and its summary, doctor, accept, locate, fleet, replay,
leakcheck, copies and asv's results; and the hardware profiles accept and locate judge by (profiles, with
the built-in ones in profiles/). Every reader (report, fleet, accept, asv, tests) loads a file through
`load` and gets a `Result` (kind, meta, rows); the fleet's metrics of a result come from `metrics`. A bad
file is one line naming the file and what is wrong (UsageError, exit 2). Imports core only."""
from __future__ import annotations

from nccl_bench.records.kinds import KINDS, SCHEMA_VERSION
from nccl_bench.records.result import Result
from nccl_bench.records.reading import from_doc, load, load_all
from nccl_bench.records.writing import document, write, write_bench

__all__ = ["KINDS", "SCHEMA_VERSION", "Result", "document", "from_doc", "load", "load_all", "write", "write_bench"]
