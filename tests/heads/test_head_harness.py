"""The head harness (tests/harness.py) over every (head, kind) pair the registered heads
declare, installed plugins' heads included: output layout, get_config round trip,
padding invariance, gradients to every weight, determinism per seed."""

import pytest

from tests import harness


@pytest.mark.parametrize(("head", "kind"), harness.head_kind_pairs())
def test_head_on_every_kind_it_declares(head, kind):
    harness.check_head(head, kind)


def test_the_harness_covers_every_kind_of_every_head():
    pairs = harness.head_kind_pairs()
    assert ("cls_linear", "multiple_choice") in pairs and ("top_bilstm", "span") in pairs
    assert len(pairs) == sum(len(spec.kinds) for spec, _ in
                             harness.plugins.registry().heads.values())
