"""Exact fills of many pods: the representation technique for sparse multi-resource subset sums.

``placer.engine.exactcover`` lists every exact fill of at most six pods by meeting in the middle
over all subsets of half the size. A node that holds seven to twelve pods puts that out of reach
(200 pods have 65 M subsets of four). When several resources must be filled exactly, though, such
fills are rare (on a perfect packing cut from full nodes, mostly only the nodes' own), and they
can be found without listing every half: a fill of ``k`` pods splits into a first half of
``a = k // 2`` pods and a second of ``k - a`` in C(k, a) ways, so asking the first half's hash to
fall in one residue class modulo ``M`` (M about C(k, a) / 2) keeps about two of those splits per
fill while cutting both half lists by ``M`` (Howgrave-Graham & Joux 2010, after Schroeppel &
Shamir). Halves of four to six pods are themselves built from the full tables of two and three
pods, joined on the residue. One trial finds each fill with probability about 1 - e^-2 (less
where ``M`` must grow to keep the lists small); callers repeat on the pods still uncovered.
Pure; deterministic for a given ``seed``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from placer.engine.packing import clock, tuning
from placer.engine.packing.exactcover import checked, hashed, spans, table
from placer.engine.scoring import IntArray

__all__ = ["NotRareError", "sampled_sets"]


class NotRareError(Exception):
    """A trial met more candidate fills than ``tuning.LARGE_FOUND``: fills of that size are not rare here."""


Members = npt.NDArray[np.int16]
Half = tuple[IntArray, Members]  # hashes and members (positions, increasing)


def _modulus(size: int, n: int) -> int | None:
    """A power of two M with C(size, size // 2) / M in [2, 4) (about two splits of a fill kept,
    so a trial finds it with probability about 1 - e^-2), or larger to keep the half lists of
    ``n`` pods within ``tuning.LARGE_ROWS`` as long as a quarter of a split is kept on average (a trial then
    finds a fill with probability at least 1 - e^-1/4; rounds repeat); None beyond that."""
    splits = math.comb(size, size // 2)
    modulus = 1 << max(0, int(math.log2(splits / 2)))
    rows = math.comb(n, size // 2) + math.comb(n, size - size // 2)
    while rows // modulus > tuning.LARGE_ROWS:
        modulus *= 2
    return modulus if 4 * splits >= modulus else None


def _join(first: Half, second: Half, mask: int, want: int) -> Half:
    """Unions of a row of ``first`` and a row of ``second`` lying wholly after it, whose hash has
    residue ``want`` (``hash & mask``)."""
    first_sums, first_members = first
    second_sums, second_members = second
    residue = second_sums & mask
    order = np.lexsort((second_members[:, 0], residue))  # by residue, then first member
    key = residue[order] * 65536 + second_members[order, 0]
    with np.errstate(over="ignore"):
        need = (want - first_sums) & mask
    start = np.searchsorted(key, need * 65536 + first_members[:, -1].astype(np.int64) + 1, "left")
    end = np.searchsorted(key, need * 65536 + 65535, "right")
    rows, at = spans(start, end - start)
    with np.errstate(over="ignore"):
        sums = first_sums[rows] + second_sums[order[at]]
    return sums, np.concatenate([first_members[rows], second_members[order[at]]], axis=1)


def _half(tables: dict[int, Half], size: int, mask: int, want: int) -> Half:
    """The subsets of ``size`` pods whose hash has residue ``want``."""
    if size <= 3:
        sums, members = tables[size]
        keep = (sums & mask) == want
        return sums[keep], members[keep]
    low = 2 if size <= 5 else 3
    return _join(tables[low], tables[size - low], mask, want)


def sampled_sets(
    vecs: IntArray,
    room: IntArray,
    exact: npt.NDArray[np.bool_],
    pool: npt.NDArray[np.intp],
    size: int,
    *,
    seed: int,
    deadline: float,
) -> list[tuple[int, ...]] | None:
    """Sets of exactly ``size`` (5..``tuning.LARGE_LARGEST``) pods among ``pool`` (rows of ``vecs``) whose
    requests add up to ``room`` exactly in the ``exact`` resources and fit it in the others
    (members increasing, indices into ``vecs``); one trial, so each such set is found with
    probability about 1 - e^-2. None when a half list would exceed its cap or the trial could not
    end before the deadline; raises ``NotRareError`` when the candidates are too many (fills are
    not rare: search otherwise)."""
    n = len(pool)
    if size > n or not 5 <= size <= tuning.LARGE_LARGEST or clock.now() > deadline:
        return None
    a, b = size // 2, size - size // 2
    modulus = _modulus(size, n)
    if modulus is None:
        return None
    halves = (math.comb(n, a) + math.comb(n, b)) // modulus
    if (halves + math.comb(n, 3)) * tuning.LARGE_SECONDS_PER_ROW > deadline - clock.now():
        return None
    rng = np.random.default_rng([seed, size, n])
    keys, target = hashed(vecs[pool], room, exact, rng)
    tables: dict[int, Half] = {1: (keys.copy(), np.arange(n, dtype=np.int16).reshape(n, 1))}
    for k in range(2, min(b, 3) + 1):
        tables[k] = table(keys, k)
        if len(tables[k][0]) == 0:
            return None
    mask = modulus - 1
    want = int(rng.integers(0, modulus))
    first_sums, first = _half(tables, a, mask, want)
    second_sums, second = _half(tables, b, mask, (target - want) & mask)
    order = np.argsort(second_sums)
    ordered = second_sums[order]
    with np.errstate(over="ignore"):
        need = np.int64(target) - first_sums
    by_need = np.argsort(need)  # sorted needles: a cache-friendly lookup
    lo = np.searchsorted(ordered, need[by_need], "left")
    counts = np.searchsorted(ordered, need[by_need], "right") - lo
    if int(counts.sum()) > tuning.LARGE_FOUND:
        raise NotRareError
    rows, at = spans(lo, counts)
    found: set[tuple[int, ...]] = set()
    for x, y in zip(first[by_need[rows]].tolist(), second[order[at]].tolist(), strict=True):
        members = set(x) | set(y)
        if len(members) == size:
            found.add(tuple(sorted(int(pool[m]) for m in members)))
    return checked(vecs, room, exact, found)
