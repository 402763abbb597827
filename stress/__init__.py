"""`python -m stress`: churn communicator re-inits under seeded skew, classify and explain failures.

Modules: options (what to run), schedule (seeded skew), verify (the exactly checked
collective), round (one round on one rank), diagnose (verdicts from every rank's evidence),
journal (crash-safe JSON lines, resume), summary (progress and tables), baseline (bare
init+destroy rate), loop (the worker), command (parser and entry point).
"""
