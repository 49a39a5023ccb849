"""Directions in weight space. A point or direction is a list of float32 arrays, one per
model weight, in `trajectory.weight_names` order; norms and dot products accumulate in
float64 over the blocks, so nothing is ever concatenated into one huge vector.

Choices (documented in docs/guide/landscape.md):
- The random direction is normalised per weight matrix ("layer normalisation" in Li et
  al.'s terms): each block d_b gets the norm of the weights it perturbs, ‖d_b‖ = ‖θ_b‖,
  after its component along δ1's block is removed, so d ⟂ δ1 exactly.
- Biases and LayerNorm gains/offsets (names ending in bias, gamma, beta) get zero in the
  random direction, like loss-landscape's `--xignore biasbn`: a perturbation of the scale
  of a LayerNorm gain (≈1) would swamp everything else.
- Scale "delta" (default) then rescales the whole random direction to ‖δ1‖, so both axes
  of a plot are in units of the fine-tuning displacement; "weights" keeps ‖d_b‖ = ‖θ_b‖
  (loss-landscape's own convention), for which β = 1 moves every matrix by its own norm.
- `filters` (from `layers.filter_axes`) switches to Li et al.'s *filter* normalisation:
  each filter of a matrix (one output unit's column, one embedding row) gets the norm of
  the same filter of θ, and the component along δ1 is removed filter by filter, so d ⟂ δ1
  still holds exactly. A filter's scale does not change what a ReLU/GELU unit followed by
  LayerNorm computes, so per-filter directions compare minima of differently scaled
  networks (Li et al., section 4).
- `keep_biasbn` perturbs biases and LayerNorm parameters too, each vector as one filter
  of its own norm (a LayerNorm gain then moves by up to its ‖γ‖ ≈ √H at β = 1).
"""

import numpy as np

NON_MATRIX_SUFFIXES = ("bias", "gamma", "beta")


def is_matrix(name, shape):
    """Whether a weight is a matrix (kernel, embedding table) rather than a bias/LayerNorm
    parameter; attention biases are 2-D ([heads, head_dim]) but still biases."""
    return len(shape) >= 2 and not name.rsplit("/", 1)[-1].endswith(NON_MATRIX_SUFFIXES)


def dot(a, b):
    return float(sum(np.vdot(x.astype(np.float64), y.astype(np.float64))
                     for x, y in zip(a, b, strict=True)))


def norm(a):
    return float(np.sqrt(dot(a, a)))


def subtract(a, b):
    return [x - y for x, y in zip(a, b, strict=True)]


def combine(origin, alpha, d1, beta=0.0, d2=None):
    """origin + α·d1 (+ β·d2)."""
    if d2 is None:
        return [o + np.float32(alpha) * x for o, x in zip(origin, d1, strict=True)]
    return [o + np.float32(alpha) * x + np.float32(beta) * y
            for o, x, y in zip(origin, d1, d2, strict=True)]


def filter_norms(block, axes):
    """The norm of each filter of `block`: over `axes`, kept as size-1 dimensions so that
    it broadcasts against the block (all axes: the matrix's norm)."""
    return np.sqrt(np.sum(np.square(block, dtype=np.float64), axis=axes, keepdims=True))


def random_direction(weights, names, seed=0, orthogonal_to=None, scale="delta", filters=None,
                     keep_biasbn=False):
    """A Gaussian direction normalised per weight matrix, or per filter with `filters` (see
    the module docstring), orthogonal to `orthogonal_to` (δ1) block by block (filter by
    filter), zero on biases and LayerNorm unless `keep_biasbn`."""
    if scale not in ("delta", "weights"):
        raise ValueError(f"scale must be 'delta' or 'weights', not {scale!r}")
    rng = np.random.default_rng(seed)
    direction = []
    for i, (name, w) in enumerate(zip(names, weights, strict=True)):
        matrix = is_matrix(name, w.shape)
        if not matrix and not keep_biasbn:
            direction.append(np.zeros_like(w, dtype=np.float32))
            continue
        axes = (filters[i] if filters is not None and matrix else None) or tuple(range(w.ndim))
        d = rng.standard_normal(w.shape)  # float64 while projecting and normalising
        if orthogonal_to is not None:
            a = orthogonal_to[i].astype(np.float64)
            aa = np.sum(a * a, axis=axes, keepdims=True)
            da = np.sum(d * a, axis=axes, keepdims=True)
            d -= np.divide(da, aa, out=np.zeros_like(aa), where=aa > 0) * a
        d_norm, w_norm = filter_norms(d, axes), filter_norms(w, axes)
        ratio = np.divide(w_norm, d_norm, out=np.zeros_like(d_norm), where=d_norm > 0)
        direction.append((d * ratio).astype(np.float32))
    if scale == "delta":
        if orthogonal_to is None:
            raise ValueError("scale='delta' needs orthogonal_to (δ1) to take its norm")
        factor = norm(orthogonal_to) / max(norm(direction), 1e-30)
        direction = [d * np.float32(factor) for d in direction]
    return direction


def pca_directions(points, origin, count=2):
    """The top `count` principal directions of the trajectory `points` around `origin`
    (loss-landscape's recipe: rows θ_i − θ1, centred, then PCA), as unit vectors, and the
    fraction of the variance each explains.

    PCA through the n×n Gram matrix of the rows (n = checkpoints): exact, and memory
    stays at the checkpoints themselves even for millions of weights.
    """
    rows = [subtract(p, origin) for p in points]
    n = len(rows)
    if n < count + 1:
        raise ValueError(f"PCA of a trajectory needs at least {count + 1} checkpoints, got {n}")
    mean = [sum(r[b] for r in rows) / n for b in range(len(origin))]
    rows = [subtract(r, mean) for r in rows]
    gram = np.array([[dot(rows[i], rows[j]) for j in range(n)] for i in range(n)])
    eigenvalues, vectors = np.linalg.eigh(gram)
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues, vectors = np.clip(eigenvalues[order], 0.0, None), vectors[:, order]
    directions = []
    for k in range(count):
        coefficients = vectors[:, k]
        d = [sum(np.float64(c) * r[b] for c, r in zip(coefficients, rows))
             for b in range(len(origin))]
        length = np.sqrt(sum(np.vdot(x, x) for x in d))
        directions.append([(x / max(length, 1e-30)).astype(np.float32) for x in d])
    total = float(eigenvalues.sum())
    explained = [float(v / total) if total > 0 else 0.0 for v in eigenvalues[:count]]
    return directions, explained


def off_plane(points, origin, d1, d2, coordinates):
    """(distance of each point from the plane origin + α·d1 + β·d2 at its projected
    `coordinates`, its distance from origin): a point off the plane is not where the
    drawn surface shows it."""
    distances, lengths = [], []
    for p, (a, b) in zip(points, coordinates, strict=True):
        offset = subtract(p, origin)
        distances.append(norm([o - a * x - b * y for o, x, y in zip(offset, d1, d2)]))
        lengths.append(norm(offset))
    return np.array(distances), np.array(lengths)


def project(points, origin, d1, d2):
    """Coordinates (α, β) of each point's offset from `origin` in the plane of d1, d2:
    least squares through their 2×2 Gram matrix (exact for points on the plane)."""
    gram = np.array([[dot(d1, d1), dot(d1, d2)], [dot(d2, d1), dot(d2, d2)]])
    coordinates = []
    for p in points:
        offset = subtract(p, origin)
        rhs = np.array([dot(offset, d1), dot(offset, d2)])
        coordinates.append(np.linalg.lstsq(gram, rhs, rcond=None)[0])
    return np.array(coordinates).reshape(-1, 2)
