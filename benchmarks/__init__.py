"""asv suite: thin adapters over nccl_bench (the logic is in nccl_bench/asv/suite.py)."""
