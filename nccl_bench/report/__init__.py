"""report: result files read back. The command, readers for every result kind (ours, nccl-tests' and
asv's), run-to-run comparison, the markdown document and its sections, figures (plot, timeline,
historyplot, with nccl-tests' anchors from anchordata/), and the asv history with its step detection.
May import the shared floors and stress's round tally; never another feature."""
