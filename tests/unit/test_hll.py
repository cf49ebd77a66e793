"""The HyperLogLog structure on its own (the byte-exact comparison with Redis is in
tests/interop/test_diff_hyperloglog.py)."""

from __future__ import annotations

import pytest

from pyrepl.keyspace import hll


def test_empty_sparse_layout_and_cache() -> None:
    h = hll.new_sparse()
    assert bytes(h[:16]) == b"HYLL\x01" + bytes(11)
    assert bytes(h[16:]) == b"\x7f\xff"          # one XZERO of 16384 registers
    assert hll.is_hll(bytes(h)) and hll.cached_card(h) == 0
    assert hll.count(hll.registers(h)) == 0


def test_adding_counts_and_promotes() -> None:
    h = hll.new_sparse()
    seen = set()
    for i in range(2000):
        h, changed = hll.add(h, b"e%d" % i, 3000)
        assert changed in (0, 1)
        seen.add(i)
    assert h[4] == hll.DENSE and len(h) == hll.DENSE_SIZE
    estimate = hll.count(hll.registers(h))
    assert abs(estimate - 2000) < 2000 * 0.05
    again, changed = hll.add(h, b"e5", 3000)
    assert changed == 0


def test_sparse_and_dense_agree_on_registers() -> None:
    h = hll.new_sparse()
    for i in range(300):
        h, _ = hll.add(h, b"x%d" % i, 10_000)
    assert h[4] == hll.SPARSE
    dense = hll.to_dense(bytearray(h))
    assert hll.registers(h) == hll.registers(dense)
    assert bytes(dense[:4]) == b"HYLL" and dense[8:16] == h[8:16]


def test_corrupt_sparse_is_refused() -> None:
    bad = bytearray(b"HYLL\x01" + bytes(11) + b"\x7f\xff\x7f\xff")   # 32768 registers
    with pytest.raises(hll.CorruptHll):
        hll.registers(bad)
    assert not hll.is_hll(b"HYLL\x00" + bytes(11))                      # dense of wrong size
    assert not hll.is_hll(b"HYLX\x01" + bytes(13))
