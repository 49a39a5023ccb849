"""Feature arrays → tf.data, batched, each batch trimmed to its own longest sequence.

Real GLUE text is mostly short (SST-2: ~13 word pieces on average), so padding every
batch to max_seq_length wastes most of the compute. Trimming the all-padding columns
changes no result: padded positions are masked out of attention and never read.
"""

import array

import numpy as np
import tensorflow as tf
from tensorflow.python.data.ops import multi_device_iterator_ops  # private: see below

ID_INPUTS = ("token_ids", "segment_ids", "padding_mask")
# Where the sequence axis is in inputs other than the ids (last axis): cached encoder
# layers (kerasbert/heads/feature_bilstm.py) are [batch, layers, seq, hidden].
SEQUENCE_AXIS = {"layer_features": 2}


def make_dataset(inputs, labels, batch_size, shuffle_seed=None, labels_per_token=False,
                 group_by_length=0):
    """Yields (inputs dict, labels) batches; labels are zeros when absent. The ids are
    int32; other inputs (cached features) keep their dtype.

    With `shuffle_seed`, the whole split is shuffled with that seed (one seed per epoch
    gives a reproducible data order, which a resumed run can replay), and with
    `group_by_length` = K > 0 batched as `group_by_length_windows` describes.
    """
    count = len(next(iter(inputs.values())))
    if labels is None:
        labels = np.zeros([count], np.int32)
    ds = tf.data.Dataset.from_tensor_slices((
        {k: np.asarray(v, np.int32) if k in ID_INPUTS else np.asarray(v)
         for k, v in inputs.items()}, labels))
    if shuffle_seed is not None:
        ds = ds.shuffle(count, seed=shuffle_seed, reshuffle_each_iteration=False)
    return batch_rows(ds, batch_size, labels_per_token, group_by_length, shuffle_seed)


# Philox4x32-10's constants (Salmon et al. 2011), as TensorFlow's random::PhiloxRandom.
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_LOW32 = np.uint64(0xFFFFFFFF)


def _philox_uint32(start, count, key, counter_high):
    """Outputs start .. start + count - 1 (start a multiple of 4) of TensorFlow's
    PhiloxRandom(key, counter_high) read one at a time (random::SingleSampleAdapter): block
    b is the 10-round Philox of the counter (b, counter_high), 4 outputs each."""
    block = np.arange(start // 4, start // 4 + -(-count // 4), dtype=np.uint64)
    c = [block & _LOW32, block >> np.uint64(32),
         np.full_like(block, counter_high & 0xFFFFFFFF),
         np.full_like(block, (counter_high >> 32) & 0xFFFFFFFF)]
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = np.uint64(_PHILOX_M[0]) * c[0], np.uint64(_PHILOX_M[1]) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & _LOW32,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & _LOW32]
        k0, k1 = (k0 + _PHILOX_W[0]) & 0xFFFFFFFF, (k1 + _PHILOX_W[1]) & 0xFFFFFFFF
    return np.stack(c, axis=1).reshape(-1)[:count]


def shuffle_order(count, seed):
    """The order in which `tf.data.Dataset.shuffle(count, seed=seed,
    reshuffle_each_iteration=False)` yields the `count` rows of a split (an int32 array of
    row indices), computed without holding the rows: tf.data's buffer keeps every row, at
    ~190 bytes a row even for a scalar index. Its algorithm, with the seeds it derives
    (tf.compat.v1.get_seed: the global seed, if set, with `seed`): a full buffer; the k-th
    row out is the buffer's slot k + (k-th Philox output mod (count - k)), whose place then
    takes slot k's row. tests/data/test_pipeline.py checks it against tf.data."""
    seed, seed2 = tf.compat.v1.get_seed(seed)
    seed, seed2 = seed or 0, seed2 or 0
    if seed == 0 and seed2 == 0:  # as tensorflow/python/data/util/random_seed.py
        seed2 = 2**31 - 1
    picks = array.array("i")
    step = 1 << 20  # a million Philox outputs at a time: ~40 MB of temporaries
    for first in range(0, count, step):
        n = min(step, count - first)
        k = np.arange(first, first + n, dtype=np.uint64)
        draws = _philox_uint32(first, n, seed, seed2)
        picks.frombytes((k + draws % (np.uint64(count) - k)).astype(np.int32).tobytes())
    slots = array.array("i", range(count))
    order = array.array("i", [0]) * count
    for k, pick in enumerate(picks):
        order[k] = slots[pick]
        slots[pick] = slots[k]
    return np.frombuffer(order, dtype=np.int32)


def group_by_length_windows(ds, batch_size, window_batches, seed):
    """Reorders shuffled rows so that each batch holds rows of similar length (HuggingFace
    Trainer's group_by_length): every window of `window_batches` × `batch_size` rows is
    sorted by length, cut into batches, and those batches are put in a random order (seeded
    by `seed` and the window's index, so a resumed epoch replays it). Padding per batch
    then pays for little more than the batch's own lengths.

    The only short batch stays last: only the last window can be short, and its shortest
    rows, the remainder, keep their place at its end. So the epoch has as many batches,
    and each batch position as many rows, as without grouping.
    """
    window = batch_size * window_batches

    def regroup(index, rows):
        inputs, labels = rows
        lengths = tf.reduce_sum(tf.cast(inputs["padding_mask"] > 0, tf.int32), axis=-1)
        # A multiple-choice row (SWAG) is as long as its longest choice.
        lengths = tf.reduce_max(tf.reshape(lengths, [tf.shape(lengths)[0], -1]), axis=1)
        by_length = tf.argsort(lengths, direction="DESCENDING", stable=True)
        full = tf.size(by_length) // batch_size
        batches = tf.reshape(by_length[:full * batch_size], [full, batch_size])
        noise = tf.random.stateless_uniform([full], seed=tf.stack([seed, index]))
        order = tf.concat([tf.reshape(tf.gather(batches, tf.argsort(noise)), [-1]),
                           by_length[full * batch_size:]], axis=0)
        return tf.nest.map_structure(lambda t: tf.gather(t, order), rows)

    seed = tf.constant(seed, tf.int64)
    return (ds.batch(window).enumerate()
            .map(lambda i, rows: regroup(tf.cast(i, tf.int64), rows),
                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            .unbatch())


def length_order(inputs):
    """The rows of `inputs` ordered by length (padding_mask's ones; a multiple-choice row:
    its longest choice), shortest first, ties in their order."""
    lengths = np.asarray(inputs["padding_mask"]).sum(-1)
    if lengths.ndim > 1:
        lengths = lengths.max(axis=tuple(range(1, lengths.ndim)))
    return np.argsort(lengths, kind="stable")


def batch_rows(ds, batch_size, labels_per_token=False, group_by_length=0, shuffle_seed=None):
    """A dataset of (inputs, label) rows -> batches trimmed to their longest sequence
    (shared by the in-memory and the streamed training split, data/streaming.py); shuffled
    rows (a `shuffle_seed`) with `group_by_length` = K > 0 are regrouped first
    (`group_by_length_windows`)."""
    if group_by_length and shuffle_seed is not None:
        ds = group_by_length_windows(ds, batch_size, group_by_length, shuffle_seed)

    def trim_padding(inputs, labels):
        length = tf.maximum(tf.reduce_max(tf.reduce_sum(inputs["padding_mask"], axis=-1)), 1)
        if labels_per_token:  # tagging labels are [batch, seq] like the inputs
            labels = labels[..., :length]
        return {k: v[:, :, :length] if SEQUENCE_AXIS.get(k) == 2 else v[..., :length]
                for k, v in inputs.items()}, labels

    ds = ds.batch(batch_size).map(trim_padding, num_parallel_calls=tf.data.AUTOTUNE)
    return without_autotuning(ds.prefetch(tf.data.AUTOTUNE))


def without_autotuning(ds):
    """`ds` without tf.data's autotuning model. Its thread sleeps in ever longer waits (to
    60 s), and an iterator destroyed beside a training step waited for the sleep to end:
    0–60 s lost at the end of an epoch (28–98 s per SST-2 epoch measured, 2026-12-02).
    AUTOTUNE parallelism then means one call per CPU core, AUTOTUNE prefetch a buffer that
    grows when it runs dry; our batches are cheap to make, so nothing else changes."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.with_options(options)


def device_datasets_without_autotuning():
    """Makes the per-device datasets of a distributed dataset's iterator without
    autotuning too (once per process; the Trainer calls it for several replicas).

    Several replicas read a dataset through tf.data's MultiDeviceIterator, which builds a
    dataset per device with default options, whatever ours say: each autotunes, and the
    iterator's destruction at an epoch's end waited for their autotuning thread to wake
    (20 s after the last step of every other 20 s epoch, two replicas on two virtual CPUs,
    2026-12-02). TensorFlow has no option for those datasets, so its private function that
    makes them is wrapped; tests/test_distribute.py fails on a TensorFlow where it moved.
    """
    make = getattr(multi_device_iterator_ops, "_create_device_dataset", None)
    if make is None or getattr(make, "kerasbert_wrapped", False):
        return

    def make_without_autotuning(*args, **kwargs):
        return without_autotuning(make(*args, **kwargs))

    make_without_autotuning.kerasbert_wrapped = True
    multi_device_iterator_ops._create_device_dataset = make_without_autotuning


def dataset_of(features, batch_size, shuffle_seed=None, labels_per_token=False,
               group_by_length=0):
    """A split's batches, whether its arrays are in memory (Features) or it is streamed
    from its file (data/streaming.StreamedFeatures)."""
    if hasattr(features, "make_dataset"):
        return features.make_dataset(batch_size, shuffle_seed, labels_per_token,
                                     group_by_length)
    return make_dataset(features.inputs, features.labels, batch_size, shuffle_seed,
                        labels_per_token, group_by_length)


def num_rows(features):
    """Feature rows of a split (not examples: a SQuAD example may give several)."""
    if hasattr(features, "num_rows"):
        return features.num_rows
    return len(next(iter(features.inputs.values())))
