"""nccl-bench: NCCL bus bandwidth, communicator-init latency, and re-init stress."""
__version__ = "0.1.0"
