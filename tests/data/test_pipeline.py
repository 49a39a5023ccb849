"""Training batches: trimmed to their longest row, and with --group_by_length formed from
length-sorted windows (every row once an epoch, the same number of batches, reproducible
by seed)."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.data import pipeline


def _rows(lengths, seq=8):
    """One row per length, its ids all its index + 1 (rows can be told apart); the labels
    are the rows' indices."""
    ids = np.zeros([len(lengths), seq], np.int32)
    for i, n in enumerate(lengths):
        ids[i, :n] = i + 1
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids),
            "padding_mask": (ids > 0).astype(np.int32)}, np.arange(len(lengths), dtype=np.int32)


def _batches(dataset):
    """Each batch as the list of its rows' indices (= labels here) and its width."""
    return [(labels.numpy().tolist(), inputs["token_ids"].shape[1])
            for inputs, labels in dataset]


def test_windows_are_sorted_by_length_and_the_short_batch_stays_last():
    lengths = [1, 5, 3, 2, 4, 6, 1, 2, 7, 3, 3]  # windows of 2 batches of 2: 4 + 4 + 3 rows
    inputs, labels = _rows(lengths)
    ds = tf.data.Dataset.from_tensor_slices((inputs, labels))
    for seed in (0, 1, 2, 3):
        got = _batches(pipeline.batch_rows(
            pipeline.group_by_length_windows(ds, 2, 2, seed), 2))
        # By hand: window [1,5,3,2] sorts to rows 1,2,3,0 -> batches {1,2} (5,3), {3,0} (2,1);
        # window [4,6,1,2] -> {5,4} (6,4), {7,6} (2,1); window [7,3,3] -> {8,9} (7,3),
        # then the remainder {10}, last. A stable sort keeps row 9 before row 10.
        assert sorted(map(sorted, (b for b, _ in got[0:2])), key=min) == [[0, 3], [1, 2]]
        assert sorted(map(sorted, (b for b, _ in got[2:4])), key=min) == [[4, 5], [6, 7]]
        assert got[4:] == [([8, 9], 7), ([10], 3)]
        # Rows longest first inside a batch; width = the batch's own longest row.
        assert {(1, 2): 5, (3, 0): 2, (5, 4): 6, (7, 6): 2}.items() <= {
            tuple(b): w for b, w in got}.items()
    # The batch order inside a window follows the seed (both orders occur over a few seeds).
    firsts = {tuple(_batches(pipeline.batch_rows(
        pipeline.group_by_length_windows(ds, 2, 2, seed), 2))[0][0]) for seed in range(8)}
    assert firsts == {(1, 2), (3, 0)}


def test_an_epoch_sees_every_row_once_in_as_many_batches_and_pads_less():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 65, size=203).tolist()  # 203 = 6 batches of 32 + 11
    inputs, labels = _rows(lengths, seq=64)
    for seed in (11, 12):
        plain = _batches(pipeline.make_dataset(inputs, labels, 32, shuffle_seed=seed))
        grouped = _batches(pipeline.make_dataset(inputs, labels, 32, shuffle_seed=seed,
                                                 group_by_length=3))
        again = _batches(pipeline.make_dataset(inputs, labels, 32, shuffle_seed=seed,
                                               group_by_length=3))
        assert grouped == again  # reproducible: a resumed epoch replays it
        assert [len(b) for b, _ in grouped] == [len(b) for b, _ in plain] == [32] * 6 + [11]
        assert collections.Counter(i for b, _ in grouped for i in b) == collections.Counter(
            range(203))
        # Every batch is as wide as its longest row, and grouping pads far less.
        assert all(w == max(lengths[i] for i in b) for b, w in grouped)
        padded = sum(len(b) * w for b, w in grouped)
        assert padded < 0.8 * sum(len(b) * w for b, w in plain)
    assert _batches(pipeline.make_dataset(inputs, labels, 32, 11, group_by_length=3)) != \
        _batches(pipeline.make_dataset(inputs, labels, 32, 12, group_by_length=3))


def test_tagging_labels_follow_their_rows():
    inputs, _ = _rows([3, 1, 2, 4], seq=4)
    labels = inputs["token_ids"] * 10  # per-token labels derived from the row
    got = list(pipeline.make_dataset(inputs, labels, 2, shuffle_seed=5, labels_per_token=True,
                                     group_by_length=2))
    for batch_inputs, batch_labels in got:
        np.testing.assert_array_equal(batch_labels.numpy(), batch_inputs["token_ids"].numpy() * 10)
    assert sorted(b[0]["token_ids"].shape[1] for b in got) == [2, 4]  # {3,4}: 4, {1,2}: 2


def test_batches_come_without_tf_data_autotuning():
    """Its model thread made each epoch's end wait up to 60 s (pipeline.without_autotuning);
    grouped or not, the training batches leave it off."""
    inputs, labels = _rows([3, 5, 2, 8])
    for group in (0, 2):
        ds = pipeline.make_dataset(inputs, labels, 2, shuffle_seed=1, group_by_length=group)
        assert ds.options().autotune.enabled is False
        assert sorted(row for rows, _ in _batches(ds) for row in rows) == [0, 1, 2, 3]


def test_the_per_device_datasets_of_several_replicas_come_without_autotuning_too(monkeypatch):
    """Several replicas read through tf.data's MultiDeviceIterator, whose per-device
    datasets autotune whatever the input's options say: its destruction then waited 20 s
    after the last step of every other 20 s epoch (two replicas on two virtual CPUs,
    2026-12-02). After pipeline.device_datasets_without_autotuning (the Trainer calls it
    for several replicas) they do not, and the batches are the same."""
    from tensorflow.python.data.ops import multi_device_iterator_ops

    inputs, labels = _rows([3, 5, 2, 8])
    ds = pipeline.make_dataset(inputs, labels, 2)
    expected = _batches(ds)

    def device_dataset_options():
        iterator = multi_device_iterator_ops.OwnedMultiDeviceIterator(ds, ["/cpu:0"])
        batches = _batches(element for [element] in iterator)  # one device
        return iterator._device_iterators[0]._dataset.options(), batches

    make = multi_device_iterator_ops._create_device_dataset
    monkeypatch.setattr(multi_device_iterator_ops, "_create_device_dataset", make)  # restored
    if not getattr(make, "kerasbert_wrapped", False):  # TensorFlow's own autotunes
        assert device_dataset_options()[0].autotune.enabled is not False
    pipeline.device_datasets_without_autotuning()
    pipeline.device_datasets_without_autotuning()  # once is enough; twice wraps once
    options, batches = device_dataset_options()
    assert options.autotune.enabled is False
    assert batches == expected


def _tf_data_order(count, seed):
    ds = tf.data.Dataset.range(count).shuffle(count, seed=seed, reshuffle_each_iteration=False)
    return np.array(list(ds.as_numpy_iterator()))


def test_shuffle_order_is_tf_data_s_whole_split_shuffle():
    """What CompactFeatures' batches rest on: the same permutation as tf.data's shuffle of
    the whole split, for small and large splits, any seed, with and without a global seed
    (a run sets one), across the Philox chunks of a million."""
    cases = [(1, 5), (2, 5), (7, 0), (17, 1), (1000, 7), (1000, 1042), (1000, 2**40 + 3)]
    for count, seed in cases:
        np.testing.assert_array_equal(pipeline.shuffle_order(count, seed),
                                      _tf_data_order(count, seed))
    assert not np.array_equal(pipeline.shuffle_order(1000, 7), pipeline.shuffle_order(1000, 8))
    tf.random.set_seed(42)
    try:
        np.testing.assert_array_equal(pipeline.shuffle_order(1000, 7), _tf_data_order(1000, 7))
    finally:
        tf.random.set_seed(None)


@pytest.mark.large
def test_shuffle_order_past_the_first_million_rows():
    big = (1 << 20) + 1001  # past the first chunk of Philox outputs
    np.testing.assert_array_equal(pipeline.shuffle_order(big, 3), _tf_data_order(big, 3))
