"""Feature arrays → tf.data, batched, each batch trimmed to its own longest sequence.

Real GLUE text is mostly short (SST-2: ~13 word pieces on average), so padding every
batch to max_seq_length wastes most of the compute. Trimming the all-padding columns
changes no result: padded positions are masked out of attention and never read.
"""

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
