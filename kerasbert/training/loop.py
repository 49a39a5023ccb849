"""One custom training loop for every tf.distribute strategy.

Keras 3's `model.fit` fails under MultiWorkerMirroredStrategy (keras#20585), so training
is a `tf.function` step run with `strategy.run`: the same code for one device, mirrored
GPUs and multi-worker.
"""

import math
import re
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from kerasbert.data import pipeline
from kerasbert.errors import TrainingError
from kerasbert.kinds.base import training_loss
from kerasbert.model.backbone import INPUT_NAMES
from kerasbert.plugins import resolve_kind
from kerasbert.kind_names import PADDING_LOGIT
from kerasbert.training import precision, xla_dropout


class NonFiniteLossError(TrainingError):
    """The loss became NaN or infinite; the run stops before saving anything."""


class Trainer:
    """Trains `model` with `optimizer` under `strategy`; also predicts.

    kind: the task's TaskKind (or its name): its loss (unless the model's head brings its
        own, kerasbert/kinds/base.py), accuracy count and label layout.
    jit_compile: XLA-compile each replica's forward and backward pass.
    accumulation_steps: K > 1 splits each replica's batch into K micro-batches, run one
        after the other (only one micro-batch's activations live at a time); their summed
        gradients make one optimizer step, the same step one batch would make.
    A model built under the mixed_float16 policy gets dynamic loss scaling
    (kerasbert/training/precision.py): `loss_scale`, or a fresh DynamicLossScale; outputs
    and losses are computed in float32.
    """

    def __init__(self, model, kind, strategy, optimizer, clip_norm=1.0, jit_compile=False,
                 accumulation_steps=1, loss_scale=None, token_mean_loss=False,
                 sequence_inputs=INPUT_NAMES, grad_norms=False):
        self.model = model
        # grad_norms: each step also returns the L2 norm of the global (all-replica)
        # gradient per group of `gradient_groups(model)`, before clipping.
        self.grad_norm_groups = gradient_groups(model) if grad_norms else None
        self.kind = resolve_kind(kind)
        self.per_example_loss = training_loss(self.kind, model)  # the head's, or the kind's
        if token_mean_loss:  # --tagging_loss=token_mean
            self.per_example_loss = token_weighted(self.per_example_loss)
        self.strategy = strategy
        self.optimizer = optimizer
        self.on_cpu = runs_on_cpu(strategy)
        if self.on_cpu:
            without_graph_optimizer()
        if strategy.num_replicas_in_sync > 1:  # see train_epoch
            pipeline.device_datasets_without_autotuning()
        self.clip_norm = clip_norm
        self.accumulation_steps = int(accumulation_steps)
        # XLA compiles once per input shape: batches trimmed to their own longest sequence
        # are padded up to a multiple of 32 so that few shapes (≤ 4 at length 128) exist.
        self.length_multiple = XLA_LENGTH_MULTIPLE if jit_compile else 1
        self.sequence_inputs = tuple(sequence_inputs)
        self.loss_scale = None
        if model.dtype_policy.compute_dtype == "float16" and optimizer is not None:
            self.loss_scale = loss_scale
            if loss_scale is None:
                with strategy.scope():
                    self.loss_scale = precision.DynamicLossScale()
        # Without XLA the replica function is simply traced into the step (no nested
        # tf.function, whose call boundary costs tracing time and graph optimisations).
        # autograph=False, as Keras' own fit/predict steps (do_not_convert): layers hold no
        # tensor-dependent Python control flow, and converting them cost ~30% of the
        # tracing before the first step (MiniLM: 4.0 → 2.8 s).
        self._gradients = (tf.function(self._xla_replica_gradients, jit_compile=True,
                                       reduce_retracing=True, autograph=False)
                           if jit_compile else self._replica_gradients)
        self._train_step = tf.function(self._distributed_step, reduce_retracing=True,
                                       autograph=False)
        self._predict_step = tf.function(  # float32 also when computed in 16 bits
            lambda inputs: tf.cast(self.model(inputs, training=False), tf.float32),
            reduce_retracing=True, autograph=False)

    def _clip(self, grads, norm=None):
        """Clips the *global* gradient (summed over replicas) to norm `clip_norm`.

        Each replica holds a partial gradient; scaling every part by the factor computed
        from their sum clips the sum, which the optimizer then all-reduces. `norm`: the
        global norm when the step measured it already (`_grad_norms`).
        """
        if not self.clip_norm:
            return grads
        if norm is None:
            norm = tf.linalg.global_norm(self._global_gradient(grads))
        scale = self.clip_norm / tf.maximum(norm, self.clip_norm)
        return [g * scale for g in grads]

    def _global_gradient(self, grads):
        """The gradient summed over replicas (this replica's part when there is one)."""
        if self.strategy.num_replicas_in_sync == 1:
            return grads
        context = tf.distribute.get_replica_context()
        return context.all_reduce(tf.distribute.ReduceOp.SUM, grads)

    def _grad_norms(self, grads):
        """float32 [groups + 1]: the L2 norm of the global gradient per group of
        `grad_norm_groups`, then its total norm, the very value `tf.linalg.global_norm`
        gives (same ops, same order), so clipping with it changes no bit. One l2_loss per
        variable, as clipping already had, and one sum per group."""
        names, group_of = self.grad_norm_groups
        variables = self.model.trainable_variables
        pairs = [(g, group_of.get(v.path, "other")) for g, v in zip(grads, variables)
                 if g is not None]
        total = self._global_gradient([g for g, _ in pairs])
        half_squares = [tf.nn.l2_loss(g) for g in total]
        two = tf.constant(2.0)
        norms = []
        for name in names:
            parts = [h for h, (_, group) in zip(half_squares, pairs) if group == name]
            norms.append(tf.sqrt(tf.reduce_sum(tf.stack(parts)) * two) if parts
                         else tf.constant(0.0))
        everything = tf.reduce_sum(tf.stack(half_squares)) if half_squares else tf.constant(0.0)
        norms.append(tf.sqrt(everything * two))
        return tf.stack(norms)

    def _loss_and_gradients(self, inputs, labels, variables, scale, global_batch_size):
        """(loss, gradients, correct count) of one (micro-)batch; the loss is this
        replica's share of the global mean, so replicas' gradients sum to the global one."""
        with tf.GradientTape() as tape:
            outputs = self.model(inputs, training=True)
            per_example = self.per_example_loss(labels, outputs, inputs)
            loss = tf.nn.compute_average_loss(
                per_example, global_batch_size=global_batch_size)
            scaled = loss if scale is None else loss * scale
        grads = tape.gradient(scaled, variables)
        return loss, grads, self.kind.correct_count(labels, outputs)

    def _replica_gradients(self, inputs, labels, scale=None):
        """(loss, correct count, gradients) of this replica's batch, K micro-batches at a time.

        Gradients are unscaled but not yet clipped; a variable that does not reach the
        output (e.g. the pooler when a head reads the raw [CLS] state) gets None.
        """
        variables = self.model.trainable_variables
        # The whole step's batch, also for each of its K micro-batches.
        global_batch_size = tf.shape(labels)[0] * self.strategy.num_replicas_in_sync
        k = self.accumulation_steps
        if k == 1:
            loss, grads, correct = self._loss_and_gradients(
                inputs, labels, variables, scale, global_batch_size)
        else:
            size = tf.shape(labels)[0]
            micro = (size + k - 1) // k
            reaches_output = []  # filled while the loop body is traced

            def micro_batch(i, loss, correct, grads):
                def piece(t):
                    return t[i * micro:(i + 1) * micro]

                part_loss, part_grads, part_correct = self._loss_and_gradients(
                    tf.nest.map_structure(piece, inputs), piece(labels), variables, scale,
                    global_batch_size)
                reaches_output[:] = [g is not None for g in part_grads]
                part_grads = [tf.zeros_like(v) if g is None else g
                              for g, v in zip(part_grads, variables)]
                return (i + 1, loss + part_loss, correct + part_correct,
                        [a + g for a, g in zip(grads, part_grads)])

            zeros = [tf.zeros_like(v) for v in variables]
            # parallel_iterations=1: one micro-batch at a time, so memory is one micro-batch's.
            _, loss, correct, grads = tf.while_loop(
                lambda i, *_: i < k, micro_batch,
                (tf.constant(0), tf.constant(0.0), tf.constant(0.0), zeros),
                parallel_iterations=1)
            grads = [g if keep else None for g, keep in zip(grads, reaches_output)]
        # Here, not in _loss_and_gradients: a subclass's loss (pre-training's) gets it too.
        grads = dense_gradients(grads)
        if scale is not None:
            grads = [None if g is None else g / scale for g in grads]
        count = tf.cast(tf.shape(labels)[0], tf.float32)
        return loss, correct, count, grads

    def _xla_replica_gradients(self, inputs, labels, scale=None):
        # On CPUs, XLA's default random-number path makes dropout ~18% of the step:
        # draw the masks with ThreeFry there (kerasbert/training/xla_dropout.py).
        with xla_dropout.threefry_dropout(self.on_cpu):
            return self._replica_gradients(inputs, labels, scale)

    def _apply(self, grads, norms=None):
        pairs = [(g, v) for g, v in zip(grads, self.model.trainable_variables) if g is not None]
        total = None if norms is None else norms[-1]
        self.optimizer.apply(self._clip([g for g, _ in pairs], total), [v for _, v in pairs])

    def _distributed_step(self, inputs, labels):
        """(global mean loss, correctly classified examples, examples) of one step, and
        with grad_norms the global gradient's norms (`_grad_norms`)."""
        scale = None if self.loss_scale is None else self.loss_scale.value()
        loss, correct, count, grads = self.strategy.run(
            self._gradients, args=(inputs, labels, scale))
        norms = None
        if self.grad_norm_groups is not None:  # every replica computes the same values
            norms = self.strategy.run(self._grad_norms, args=(grads,))
        if self.loss_scale is None:
            self.strategy.run(self._apply, args=(grads, norms))
        else:  # skip the step when a float16 gradient overflowed on any replica
            finite = self.strategy.run(precision.all_finite, args=(grads,))
            finite = (self.strategy.reduce(tf.distribute.ReduceOp.SUM, finite, axis=None)
                      == self.strategy.num_replicas_in_sync)
            tf.cond(finite, lambda: self.strategy.run(self._apply, args=(grads, norms)),
                    lambda: None)
            self.loss_scale.update(finite)
        totals = tuple(self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                       for value in (loss, correct, count))
        if norms is None:
            return totals
        return totals + (self.strategy.reduce(tf.distribute.ReduceOp.MEAN, norms, axis=None),)

    def train_epoch(self, dataset, num_steps, on_step=None, show_progress=None):
        """Runs up to `num_steps` steps of `dataset`.

        Returns the mean training loss and, for classification-like kinds, the accuracy
        on the training batches as they were seen (with dropout on), else None.
        """
        if show_progress is None:
            show_progress = sys.stderr.isatty()
        bar = keras.utils.Progbar(num_steps, stateful_metrics=["lr"]) if show_progress else None
        total, steps, correct, seen = 0.0, 0, 0.0, 0
        self.last_grad_norms = None  # the latest step's, with grad_norms (read by on_step)
        if self.length_multiple > 1:
            limit = getattr(getattr(self.model, "backbone", None), "max_sequence_length", None)
            dataset = dataset.map(lambda x, y: pad_to_multiple(
                x, y, self.length_multiple, labels_per_token=self.kind.labels_per_token,
                max_length=limit, keys=self.sequence_inputs))
        # One replica iterates the dataset itself: OneDeviceStrategy would wrap it in a
        # MultiDeviceIterator, whose destruction at every epoch's end waited for tf.data's
        # autotuning thread to wake up (0–60 s; 28–98 s per epoch measured, 2026-12-02).
        # Several replicas need one, its per-device datasets without autotuning (__init__).
        batches = (dataset if self.strategy.num_replicas_in_sync == 1
                   else self.strategy.experimental_distribute_dataset(dataset))
        if self.length_multiple == 1:
            # One trace for every batch length (the spec's length is None), instead of one
            # for the first length and a relaxed one at the second (~10 s each on a CPU).
            self._train_step.get_concrete_function(*batches.element_spec)
        for inputs, labels in batches:
            if steps >= num_steps:
                break
            loss, batch_correct, batch_count, *norms = self._train_step(inputs, labels)
            loss, batch_correct, batch_count = (
                float(x) for x in (loss, batch_correct, batch_count))
            self.last_grad_norms = norms[0].numpy() if norms else None
            correct += batch_correct
            seen += batch_count
            step = int(self.optimizer.iterations.numpy())
            if not math.isfinite(loss):
                raise NonFiniteLossError(f"the training loss became {loss} at step {step}")
            total += loss
            steps += 1
            if on_step is not None:
                on_step(step, loss)
            if bar is not None:
                bar.update(steps, [("loss", loss), ("lr", self.learning_rate())])
        accuracy = correct / max(seen, 1) if self.kind.has_accuracy else None
        return total / max(steps, 1), accuracy

    def learning_rate(self):
        return float(self.optimizer.learning_rate)

    def predict(self, dataset, padding_value=PADDING_LOGIT):
        """Raw model outputs (logits or values) for every example, in order.

        Per-token outputs ([batch, seq, ...]) of batches trimmed to different lengths are
        right-padded to the longest with `padding_value`, a logit no decoder will pick.
        """
        self._predict_step.get_concrete_function(dataset.element_spec[0])  # one trace
        outputs = [self._predict_step(inputs).numpy() for inputs, _ in dataset]
        if not outputs:
            return np.zeros([0])
        if outputs[0].ndim >= 3:
            width = max(o.shape[1] for o in outputs)
            outputs = [np.pad(o, [(0, 0), (0, width - o.shape[1])] + [(0, 0)] * (o.ndim - 2),
                              constant_values=padding_value) for o in outputs]
        return np.concatenate(outputs, axis=0)


XLA_LENGTH_MULTIPLE = 32

TOTAL_GROUP = "total"
_LAYER = re.compile(r"(?:^|/)transformer_layer_(\d+)/")


def gradient_groups(model):
    """(group names, {variable path: group}) of every weight of `model`, for the gradient
    norms: "embeddings", "layer_<i>" (keras-hub's transformer_layer_<i>), "pooler"
    (pooled_dense), "head" (every weight outside the encoder) and "other" (an encoder
    weight of none of those, e.g. another encoder's); the names in that order, those with
    weights only, then "total" (the whole gradient) last."""
    backbone = getattr(model, "backbone", None)
    encoder = {v.path for v in backbone.weights} if backbone is not None else set()
    group_of = {}
    for v in model.weights:
        if v.path not in encoder:
            group_of[v.path] = "head"
        elif (match := _LAYER.search(v.path)) is not None:
            group_of[v.path] = f"layer_{int(match.group(1))}"
        elif "embedding" in v.path:
            group_of[v.path] = "embeddings"
        elif "pooled_dense" in v.path:
            group_of[v.path] = "pooler"
        else:
            group_of[v.path] = "other"
    present = set(group_of.values())
    layers = sorted((g for g in present if g.startswith("layer_")), key=lambda g: int(g[6:]))
    names = [g for g in ["embeddings", *layers, "pooler", "head", "other"] if g in present]
    return names, group_of


def runs_on_cpu(strategy):
    """Whether every replica of `strategy` is a CPU (TensorFlow's default strategy: whether
    its default device is, i.e. no GPU or TPU is visible)."""
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:  # the default strategy has no device list
        return not (tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))
    return all("CPU" in d.upper() for d in devices)


def without_graph_optimizer():
    """Turns Grappler, TensorFlow's graph optimiser, off for the functions this process
    makes from now on (the Trainer does so on CPUs).

    On a CPU it spent 0.6–0.8 s of the first step rewriting the training step's ~5,600
    ops, and the steps were as fast without it: MiniLM, batch 32, 2 cores, three
    alternating pairs (2026-12-02): model loaded → first step 3.3–3.7 s with it, 2.8–3.0 s
    without; benchmarks/bench_training.py's step 0.471 s without it, 0.487 s with
    (docs/experiments/speed-and-memory.md).
    """
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


def pad_to_multiple(inputs, labels, multiple, labels_per_token=False, max_length=None,
                    keys=INPUT_NAMES):
    """Right-pads a batch's sequence axis to a multiple of `multiple`, but not beyond
    `max_length` (the encoder's position table): masked positions (padding_mask 0,
    tagging label -1) that change no result. `keys`: the inputs whose last axis is the
    sequence, the first giving its length (other inputs, e.g. pre-training's masked
    positions, are left as they are)."""
    length = tf.shape(inputs[keys[0]])[-1]
    missing = (multiple - length % multiple) % multiple
    if max_length is not None:
        missing = tf.minimum(missing, tf.maximum(max_length - length, 0))

    def pad(t, value=0):
        widths = [[0, 0]] * (len(t.shape) - 1) + [[0, missing]]
        return tf.pad(t, widths, constant_values=value)

    inputs = {k: pad(v) if k in keys else v for k, v in inputs.items()}
    return inputs, (pad(labels, -1) if labels_per_token else labels)


def dense_gradients(grads):
    """Gradients with every `tf.IndexedSlices` summed into a dense tensor.

    An embedding lookup's gradient is an IndexedSlices with one row per *occurrence* of an
    id, repeats not summed (segment 0 appears 4,096 times in a 32 × 128 batch). Keras 3's
    Adam applies such a gradient row by row: the moments' decay and g² once per repeat, so
    v holds Σ g_i² instead of (Σ g_i)² and m decays many times a step; and
    `tf.linalg.global_norm` measures the unsummed rows, so clipping sees a wrong norm.
    Summed, every embedding gets the update PyTorch and google-research/bert give it (their
    embedding gradients are dense) and the fused Adam kernel (training/optimization.py).
    """
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]


def token_weighted(sentence_mean_loss):
    """A tagging kind's per-sentence losses (each the mean over the sentence's labelled
    words) reweighted so that their batch mean is the mean over all the batch's labelled
    words (--tagging_loss=token_mean): sentence i gets weight n_i · B / Σ n. Per replica and
    per micro-batch, as HuggingFace's token mean is per device and per accumulation step."""
    def per_example_loss(labels, outputs, inputs):
        words = tf.reduce_sum(tf.cast(labels >= 0, tf.float32), axis=-1)
        rows = tf.cast(tf.shape(words)[0], tf.float32)
        weights = words * rows / tf.maximum(tf.reduce_sum(words), 1.0)
        return sentence_mean_loss(labels, outputs, inputs) * weights
    return per_example_loss


def trainer_options(config):
    """The Trainer's keyword arguments from a RunConfig (--jit_compile, accumulation,
    --tagging_loss)."""
    return {"jit_compile": config.jit_compile,
            "accumulation_steps": config.gradient_accumulation_steps,
            "token_mean_loss": config.tagging_loss == "token_mean",
            "grad_norms": config.grad_norm_every > 0}


def count_steps(num_rows, batch_size, num_epochs):
    """Steps per epoch over `num_rows` feature rows (a partial last batch counts) and total
    steps for the run."""
    per_epoch = math.ceil(num_rows / batch_size)
    return per_epoch, int(math.ceil(per_epoch * num_epochs))


class Timer:
    def __init__(self):
        self.start = time.perf_counter()

    def seconds(self):
        return time.perf_counter() - self.start
