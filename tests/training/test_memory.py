import os

import numpy as np
import pytest

from kerasbert.training import memory

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                                reason="needs Linux's /proc/self/clear_refs")


def test_the_peak_follows_an_allocation_and_a_reset_forgets_it():
    assert memory.reset_peak_rss()
    before = memory.peak_rss_mb()
    block = np.ones(256 * 2**20 // 8)  # 256 MiB, every page written
    grown = memory.peak_rss_mb()
    del block
    assert grown - before == pytest.approx(256, abs=16)
    # freed, the high-water mark stays (to the kernel's per-thread RSS counting: ~1 MiB)
    assert memory.peak_rss_mb() == pytest.approx(grown, abs=4)
    assert memory.reset_peak_rss()
    assert memory.peak_rss_mb() < grown - 200  # a new mark at the resident set of now
    assert memory.rss_mb() == pytest.approx(memory.peak_rss_mb(), abs=4)
