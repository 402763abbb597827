"""Root selection (PyTorch getRootIndex / NCCL rootIdFromRank) and key names per mode."""
import math

import pytest

from nccl_bench.comm.bootstrap import id_keys, num_roots, root_index, root_of, root_ranks
from nccl_bench.core.errors import UsageError


def test_pytorch_documented_example():
    assert root_ranks(10, 3) == [0, 4, 7]


def block_rule(n, k):
    """First n % k blocks have n // k + 1 ranks, the rest n // k; a block's first rank is its root."""
    sizes = [n // k + (1 if b < n % k else 0) for b in range(k)]
    starts = [sum(sizes[:b]) for b in range(k)]
    owner = [b for b in range(k) for _ in range(sizes[b])]
    return starts, owner


@pytest.mark.parametrize("n", range(1, 65))
def test_block_rule_exhaustive(n):
    for k in range(1, n + 1):
        starts, owner = block_rule(n, k)
        assert root_ranks(n, k) == starts
        for r in range(n):
            assert root_index(r, n, k) == (starts.index(r) if r in starts else -1)
            assert root_of(r, n, k) == owner[r]


@pytest.mark.parametrize("n,rpr", [(1, 1), (2, 1), (3, 2), (256, 128), (257, 128), (10, 128)])
def test_num_roots_is_ceil(n, rpr):
    assert num_roots(n, rpr) == math.ceil(n / rpr)


def test_ranks_per_root_zero_is_usage_error():
    with pytest.raises(UsageError, match="ranks-per-root"):
        num_roots(4, 0)


def test_key_names_per_mode():
    assert id_keys("regular", 7, 1) == ["7"]
    assert id_keys("stock", 7, 2) == ["UniqueNCCLID:0", "UniqueNCCLID:1"]
    assert id_keys("stock", 8, 2) == id_keys("stock", 7, 2)  # the bug: same keys every init
    assert id_keys("scoped", 7, 2) == ["7:UniqueNCCLID:0", "7:UniqueNCCLID:1"]
    assert id_keys("scoped", 8, 2) != id_keys("scoped", 7, 2)
