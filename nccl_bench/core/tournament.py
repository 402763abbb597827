"""Rounds of disjoint pairs (a round-robin tournament by the circle method): player 0 stays, the others rotate
one place a round, and position i meets position m-1-i. n-1 rounds for even n, n for odd n (one player sits out
each round); over all of them every pair meets once. Any round is computed on its own, in O(n): the first k rounds
of a 12,500-node fleet take milliseconds, where listing the whole tournament would take 78 million pairs."""
from __future__ import annotations


def round_of(n: int, r: int) -> list[tuple[int, int]]:
    """Round r (0-based) of n players: its pairs (a < b), sorted."""
    m = n + (n % 2)  # an odd count plays with a ghost: its partner sits the round out
    if n < 2 or not 0 <= r < m - 1:
        return []

    def at(j: int) -> int:  # who stands at position j after r rotations
        return 0 if j == 0 else 1 + (j - 1 - r) % (m - 1)
    pairs = ((at(i), at(m - 1 - i)) for i in range(m // 2))
    return sorted((min(a, b), max(a, b)) for a, b in pairs if a < n and b < n)


def tournament(n: int, rounds: int | None = None) -> list[list[tuple[int, int]]]:
    """The first `rounds` rounds (all of them by default): every unordered pair of n players meets once in all."""
    total = 0 if n < 2 else n - 1 + (n % 2)
    return [round_of(n, r) for r in range(total if rounds is None else min(rounds, total))]


def partners(n: int, k: int) -> list[list[tuple[int, int]]]:
    """Rounds in which each of n players meets at least min(k, n-1) different partners: the first k rounds, and for
    odd n one more, holding only the pairs that a player who sat out still needs."""
    k = min(k, n - 1)
    out = tournament(n, k)
    if n % 2 and k < n:  # an odd count has n rounds: one more is there to take
        met = [0] * n
        for pairs in out:
            for a, b in pairs:
                met[a] += 1
                met[b] += 1
        extra = [(a, b) for a, b in round_of(n, k) if met[a] < k or met[b] < k]
        if extra:
            out.append(extra)
    return out
