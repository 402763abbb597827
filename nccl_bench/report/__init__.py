"""report: result files read back (through nccl_bench.records, every kind: ours, nccl-tests' and asv's) as a
markdown document with a section per kind, run-to-run comparison, figures (plot, timeline, historyplot,
with nccl-tests' anchors from anchordata/), and the asv history with its step detection.
May import the shared layers and stress's round tally; never another feature."""
