"""The job store's barrier on a real TCPStore: a rank that arrives as another's wait gives up is no rank missing."""
import pytest

from nccl_bench.core.errors import BarrierTimeout
from nccl_bench.core.launch import Identity
from nccl_bench.job.store import JobStore


def rank0_of_two(tmp_path) -> JobStore:
    """Rank 0 of a two-rank job under our own launcher (it hosts the store and publishes its address)."""
    ident = Identity(rank=0, world_size=2, local_rank=0, local_world_size=2, master_addr="127.0.0.1", master_port=0,
                     launcher="torchrun", host="here", store_file=str(tmp_path / "store"))
    return JobStore(ident, timeout=5.0)


def test_a_rank_that_arrived_as_the_wait_gave_up_passes_the_barrier(tmp_path):
    """Rank 1 set its arrival and had not yet counted itself when rank 0's wait ran out (a node back from a cut,
    seen in a loaded CI run): every rank is there, so the barrier is passed, as rank 1 sees it. It used to raise
    BarrierTimeout naming nobody, and stress crashed on the empty diagnosis."""
    store = rank0_of_two(tmp_path)
    store.raw.set("bar/late/1", b"1")
    store.barrier("late", timeout=0.2)


def test_a_rank_that_never_arrives_is_named(tmp_path):
    store = rank0_of_two(tmp_path)
    with pytest.raises(BarrierTimeout) as e:
        store.barrier("never", timeout=0.2)
    assert [r for r, _ in e.value.missing] == [1]
