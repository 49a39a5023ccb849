"""How sharp the training loss is at a point of weight space: Hessian-vector products, the
top of the Hessian's spectrum (Lanczos), its trace (Hutchinson) and ε-sharpness.

The loss is the one the run trained with (`kinds.base.training_loss`: the head's own, else
the kind's), averaged over a fixed sample of training rows, in inference mode
(training=False): without dropout the loss is a deterministic function of θ, so it has one
Hessian. Vectors are flat float64 numpy arrays over the weights of `variables` (default
every floating-point weight, `trajectory.model_weights` order).

Hessian-vector products, two ways (`hvp=`), one traced function per batch shape:
- double_backward (default): the gradient of ⟨∇L, v⟩ by a second GradientTape around the
  first (Pearlmutter's trick by reverse over reverse);
- forward_over_backward: a `tf.autodiff.ForwardAccumulator` carries the tangent v through
  the gradient computation (`tape.gradient` inside the accumulator), so Hv is the JVP of
  the gradient: TensorFlow's documented recipe, and in theory the cheaper one; but TF has
  no forward rules for most ops and derives them by differentiating their gradients again,
  so here it traced 3× slower and ran slower on MiniLM's shape (docs/guide/landscape.md, "Sharpness").
Both are exact (tests/landscape/test_hessian.py checks them against finite differences of
the gradient and the Hessian built by `tape.jacobian`); benchmarks/bench_landscape.py times
them.

LayerNorm needs care: `tf.nn.moments`, which Keras' LayerNormalization uses on
TensorFlow, takes the variance around `stop_gradient(mean)`. The gradient is still exact
(the dropped term is zero), but every second derivative through a LayerNorm misses the
mean's −2/n² term: on a 1-layer BERT, HVPs through it were 7% off finite differences.
`exact_moments()` swaps in the plain formula while these functions are traced.

Estimators (Ghorbani et al. 2019, Yao et al. 2020 "PyHessian" for the recipe; the code is
our own):
- `lanczos`: m steps of Lanczos with full reorthogonalisation; the extreme Ritz values
  converge first, and each comes with its residual bound ‖Hy − θy‖ = β_m·|s_mi|, so the
  output says how far each eigenvalue can be from the truth. m HVPs, a fixed cost.
- `hutchinson`: tr(H) = E[zᵀHz] for Rademacher z; the mean over probes with its standard
  error; a layer group's block trace tr(H_gg) = E[z_gᵀ(Hz)_g] comes from the same probes.
- `epsilon_sharpness`: Keskar et al. (2017)'s max over a ball of L(θ + y) − L(θ), the ball
  filter-normalised (each filter may move by ε times its own norm: invariant to rescaling
  a filter, which λ_max is not), by projected gradient ascent from a random start.
"""

import contextlib
import time

import numpy as np
import scipy.linalg
import tensorflow as tf

from kerasbert.data import pipeline
from kerasbert.kinds.base import training_loss
from kerasbert.landscape.directions import filter_norms
from kerasbert.training.trajectory import model_weights

HVP_METHODS = ("double_backward", "forward_over_backward")
_ZERO = tf.UnconnectedGradients.ZERO  # a weight the loss does not reach: zero, not None


@contextlib.contextmanager
def exact_moments():
    """Keras' TensorFlow `moments` without tf.nn.moments' stop_gradient (module docstring):
    the same values, and second derivatives that are right. Active while tracing."""
    from keras.src.backend.tensorflow import nn as keras_tf_nn  # where LayerNorm's moments live

    original = keras_tf_nn._compute_moments

    def moments(x, axes, keepdims):
        mean = tf.reduce_mean(x, axes, keepdims=True)
        variance = tf.reduce_mean(tf.square(x - mean), axes, keepdims=True)
        if not keepdims:
            mean, variance = tf.squeeze(mean, axes), tf.squeeze(variance, axes)
        return mean, variance

    keras_tf_nn._compute_moments = moments
    try:
        yield
    finally:
        keras_tf_nn._compute_moments = original


def sample_batches(features, batch_size, kind):
    """The fixed sample's (inputs, labels) batches, built once."""
    return list(pipeline.make_dataset(features.inputs, features.labels, batch_size,
                                      labels_per_token=kind.labels_per_token))


class TrainingLoss:
    """The mean training loss of `model` over fixed `batches`, as a function of the weights
    in `variables`: its value, gradient and Hessian-vector products on flat vectors."""

    def __init__(self, model, kind, batches, variables=None, hvp="double_backward"):
        if hvp not in HVP_METHODS:
            raise ValueError(f"hvp must be one of {HVP_METHODS}, not {hvp!r}")
        self.model = model
        self.variables = list(variables if variables is not None else model_weights(model))
        # The tf.Variables under the Keras variables: what tapes and accumulators watch.
        self._watched = [v.value for v in self.variables]
        self.shapes = [tuple(v.shape) for v in self.variables]
        self.offsets = np.cumsum([0] + [int(np.prod(s)) for s in self.shapes])
        self.size = int(self.offsets[-1])
        self.batches = batches
        self.count = sum(int(tf.shape(labels)[0]) for _, labels in batches)
        self._per_example = training_loss(kind, model)
        options = dict(reduce_retracing=True, autograph=False)
        self._value_and_gradient = tf.function(self._value_and_gradient_fn, **options)
        self._hvp = tf.function(self._forward_over_backward if hvp == "forward_over_backward"
                                else self._double_backward, **options)
        self.hvp_method = hvp
        self.hvps, self.hvp_seconds = 0, 0.0

    # --- Traced, per batch: sums over the batch (the caller divides by the sample size) ---

    def _batch_loss(self, inputs, labels):
        outputs = self.model(inputs, training=False)
        return tf.reduce_sum(self._per_example(labels, outputs, inputs))

    def _gradient_of(self, inputs, labels):
        with tf.GradientTape() as tape:
            tape.watch(self._watched)
            loss = self._batch_loss(inputs, labels)
        # Embedding gradients are IndexedSlices: dense, so products and JVPs are plain.
        return loss, [tf.convert_to_tensor(g) for g in
                      tape.gradient(loss, self._watched, unconnected_gradients=_ZERO)]

    def _value_and_gradient_fn(self, inputs, labels):
        return self._gradient_of(inputs, labels)

    def _forward_over_backward(self, inputs, labels, vector):
        with tf.autodiff.ForwardAccumulator(self._watched, vector) as accumulator:
            _, gradient = self._gradient_of(inputs, labels)
        return [tf.convert_to_tensor(h) for h in
                accumulator.jvp(gradient, unconnected_gradients=_ZERO)]

    def _double_backward(self, inputs, labels, vector):
        with tf.GradientTape() as outer:
            outer.watch(self._watched)
            _, gradient = self._gradient_of(inputs, labels)
            projected = tf.add_n([tf.reduce_sum(g * v) for g, v in zip(gradient, vector)])
        return [tf.convert_to_tensor(h) for h in
                outer.gradient(projected, self._watched, unconnected_gradients=_ZERO)]

    # --- Flat vectors ------------------------------------------------------------------

    def blocks(self, flat, dtype=np.float32):
        """A flat vector as arrays shaped like `variables`."""
        return [np.asarray(flat[a:b], dtype).reshape(s)
                for a, b, s in zip(self.offsets[:-1], self.offsets[1:], self.shapes)]

    def flatten(self, blocks):
        return np.concatenate([np.asarray(b, np.float64).ravel() for b in blocks])

    def weights(self):
        """The current weights, flat (float64)."""
        return self.flatten([v.numpy() for v in self.variables])

    def set_weights(self, blocks):
        for v, b in zip(self.variables, blocks, strict=True):
            v.assign(np.asarray(b, v.dtype))

    # --- The loss ------------------------------------------------------------------------

    def value_and_gradient(self):
        """(mean loss, flat gradient) at the current weights."""
        loss, gradient = 0.0, np.zeros(self.size)
        for inputs, labels in self.batches:
            with exact_moments():  # (re)tracing happens inside the call
                part, grads = self._value_and_gradient(inputs, labels)
            loss += float(part)
            gradient += self.flatten([g.numpy() for g in grads])
        return loss / self.count, gradient / self.count

    def hvp(self, vector):
        """H·v at the current weights (flat in, flat out)."""
        start = time.perf_counter()
        tangent = [tf.constant(b) for b in self.blocks(vector)]
        result = np.zeros(self.size)
        for inputs, labels in self.batches:
            with exact_moments():
                product = self._hvp(inputs, labels, tangent)
            result += self.flatten([h.numpy() for h in product])
        self.hvps += 1
        self.hvp_seconds += time.perf_counter() - start
        return result / self.count


# --- Spectrum and trace -------------------------------------------------------------------

def lanczos(matvec, size, steps, seed=0):
    """Ritz values of the symmetric operator `matvec` after `steps` Lanczos steps (at most
    `size`), in descending order, with their residual bounds; `steps` matvecs.

    Full reorthogonalisation against every earlier Lanczos vector (twice: "twice is
    enough") keeps converged eigenvalues from reappearing as spurious copies, so the top k
    Ritz values estimate the top k eigenvalues. The Lanczos vectors are kept in float32:
    steps × size × 4 bytes (MiniLM-L6, 20 steps: 1.8 GB).
    """
    steps = int(min(steps, size))
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(size)
    q /= np.linalg.norm(q)
    basis = np.empty((steps, size), np.float32)
    alphas, betas = [], []
    q_previous, beta = None, 0.0
    for j in range(steps):
        basis[j] = q
        w = matvec(q)
        alpha = float(q @ w)
        w -= alpha * q
        if q_previous is not None:
            w -= beta * q_previous
        for _ in range(2):
            for row in basis[: j + 1]:
                w -= float(row @ w) * row
        alphas.append(alpha)
        beta = float(np.linalg.norm(w))
        if j == steps - 1 or beta <= 1e-12 * max(abs(a) for a in alphas):
            break  # done, or an invariant subspace: the Ritz values are exact
        betas.append(beta)
        q_previous, q = q, w / beta
    ritz, vectors = scipy.linalg.eigh_tridiagonal(np.array(alphas), np.array(betas))
    order = np.argsort(ritz)[::-1]
    residuals = beta * np.abs(vectors[-1, order])
    return ritz[order], residuals


def hutchinson(matvec, size, probes, seed=0, offsets=None):
    """Hutchinson's trace estimate with `probes` Rademacher vectors: (mean, standard error,
    samples), and with `offsets` (block boundaries of the flat vector) the per-block
    samples z_bᵀ(Hz)_b too, [probes, blocks], whose means estimate the block traces."""
    rng = np.random.default_rng(seed)
    totals, per_block = [], []
    for _ in range(probes):
        z = rng.integers(0, 2, size) * 2.0 - 1.0
        product = z * matvec(z)
        totals.append(float(product.sum()))
        if offsets is not None:
            per_block.append(np.add.reduceat(product, offsets[:-1]))
    totals = np.array(totals)
    mean, error = mean_and_standard_error(totals)
    return mean, error, totals, (np.array(per_block) if offsets is not None else None)


def mean_and_standard_error(samples, axis=0):
    samples = np.asarray(samples, np.float64)
    n = samples.shape[axis]
    mean = samples.mean(axis=axis)
    error = samples.std(axis=axis, ddof=1) / np.sqrt(n) if n > 1 else np.full_like(mean, np.nan)
    return mean, error


# --- ε-sharpness ---------------------------------------------------------------------------

def project_to_ball(y, radii, axes):
    """Each filter of each block of `y` scaled back into its ball ‖y_f‖ ≤ r_f; blocks
    whose `axes` is None are not perturbed (zero)."""
    out = []
    for block, radius, a in zip(y, radii, axes, strict=True):
        if a is None:
            out.append(np.zeros_like(block))
            continue
        length = filter_norms(block, a)
        out.append(block * np.minimum(1.0, radius / np.maximum(length, 1e-30)))
    return out


def epsilon_sharpness(value_and_gradient, theta, axes, epsilon, steps=10, seed=0):
    """max L(θ + y) − L(θ) over ‖y_f‖ ≤ ε‖θ_f‖ for every filter f, by projected gradient
    ascent (a lower bound of the true maximum, ≥ 0: y = 0 is in the ball).

    value_and_gradient(blocks) -> (loss, gradient blocks) at θ + y; theta: blocks; axes:
    per block the axes one filter spans (`layers.filter_axes`), None = not perturbed.
    Start: a random point at half the radius of every filter (from an exact minimum the
    gradient is zero and ascent from y = 0 would never move). Each step moves every filter
    by 2.5 r_f / steps along its own gradient direction (the PGD step of Madry et al.,
    per filter), then projects back.
    Returns {"epsilon", "loss", "rise", "keskar" (100·rise / (1 + L(θ))), "rises" per step}.
    """
    radii = [None if a is None else epsilon * filter_norms(w, a) for w, a in zip(theta, axes)]
    rng = np.random.default_rng(seed)
    y = [rng.standard_normal(w.shape) for w in theta]
    y = [None if a is None else b * (0.5 * r / np.maximum(filter_norms(b, a), 1e-30))
         for b, r, a in zip(y, radii, axes)]
    y = project_to_ball([np.zeros_like(w, np.float64) if b is None else b
                         for w, b in zip(theta, y)], radii, axes)
    base, _ = value_and_gradient(theta)
    best, rises = 0.0, []
    for _ in range(steps + 1):
        loss, gradient = value_and_gradient([w + b for w, b in zip(theta, y)])
        rises.append(loss - base)
        best = max(best, loss - base)
        moved = []
        for b, g, r, a in zip(y, gradient, radii, axes):
            if a is None:
                moved.append(b)
                continue
            g = np.asarray(g, np.float64)
            moved.append(b + (2.5 / steps) * r * g / np.maximum(filter_norms(g, a), 1e-30))
        y = project_to_ball(moved, radii, axes)
    return {"epsilon": float(epsilon), "loss": float(base), "rise": float(best),
            "keskar": float(100.0 * best / (1.0 + base)), "steps": int(steps),
            "rises": [float(r) for r in rises]}
