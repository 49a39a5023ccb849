"""One frozen, validated LandscapeConfig made from `python -m kerasbert.landscape`'s flags.

The analysis, the plane, the curvature and the writers read this config, never the flags
(as runs read RunConfig), so a test or another tool builds one in code. Each field has its
flag's name; `validate` refuses a bad value in one line naming that flag.
"""

import dataclasses
import os

import numpy as np

from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_json
from kerasbert.landscape.hessian import HVP_METHODS

DEFAULT_MODES = ("1d", "2d", "trajectory", "layers", "rollback")
CURVATURE_MODES = ("hessian", "sharpness")
MODES = DEFAULT_MODES + CURVATURE_MODES + ("three_point",)  # the curvature modes cost HVPs: opt in
DIRECTIONS = ("random", "random_pair", "pca")
NORMALIZATIONS = ("matrix", "filter")
BIASBN = ("ignore", "keep")
DIRECTION_SCALES = ("delta", "weights", "loss_rise")
# The α range of the 2D grid when none is given: θ0 at α = -1 with δ1 as the first axis;
# two random axes are centred on θ1.
RANGE_ALPHA = {"random_pair": (-1.0, 1.0)}
DEFAULT_RANGE_ALPHA = (-1.5, 0.5)
# Integer settings and their least allowed value, in the order they are checked.
MINIMUMS = (("points_1d", 2), ("grid", 2), ("batch_size", 1), ("train_sample", 0),
            ("dev_sample", 0), ("top_k", 1), ("lanczos_steps", 1), ("hutchinson_probes", 0),
            ("hessian_batch_size", 1), ("ascent_steps", 1))
RANGES = ("range_1d", "range_alpha", "range_beta")


def _joined(values):
    return ",".join(v if isinstance(v, str) else f"{v:g}" for v in values)


def range_problem(values):
    """Why `values` is not a range low,high (a message), or None."""
    if len(values) != 2:
        return "expected two numbers, low,high"
    return None if values[0] < values[1] else "low must be below high"


def epsilons_ok(values):
    return bool(values) and all(0 < e < np.inf for e in values)


@dataclasses.dataclass(frozen=True)
class LandscapeConfig:
    """What to analyse and how: one field per flag of `python -m kerasbert.landscape`
    (see cli.py for each one's help). `range_alpha=None` is the --direction's default and
    `output_dir=None` is <run_dir>/landscape; both are filled in when the config is made."""

    run_dir: str
    compare_run_dir: str | None = None
    output_dir: str | None = None
    data_dir: str | None = None
    mode: tuple[str, ...] = DEFAULT_MODES
    train_sample: int = 256
    dev_sample: int = 256
    batch_size: int = 128
    seed: int = 0
    # 1D interpolation θ0 → θ1
    points_1d: int = 21
    range_1d: tuple[float, float] = (-0.5, 1.5)
    # The 2D plane around θ1
    grid: int = 11
    range_alpha: tuple[float, float] | None = None
    range_beta: tuple[float, float] = (-1.0, 1.0)
    direction: str = "random"
    normalization: str = "matrix"
    biasbn: str = "ignore"
    direction_scale: str = "delta"
    loss_rise: float = 1.0
    # The three-point plane through θ0, θ_a (--run_dir) and θ_b (--compare_run_dir)
    plane_margin: float = 0.3
    # Curvature: the Hessian at θ1
    top_k: int = 3
    lanczos_steps: int = 20
    hutchinson_probes: int = 20
    hessian_groups: bool = False
    hessian_trajectory: bool = False
    hvp: str = "double_backward"
    hessian_batch_size: int = 32
    # ε-sharpness at θ1
    epsilon: tuple[float, ...] = (0.001, 0.01)
    ascent_steps: int = 10

    def __post_init__(self):
        for name in ("mode", "epsilon") + RANGES:  # lists (e.g. from JSON) as tuples
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        self.validate()
        if self.range_alpha is None:
            object.__setattr__(self, "range_alpha",
                               RANGE_ALPHA.get(self.direction, DEFAULT_RANGE_ALPHA))
        if self.output_dir is None:
            object.__setattr__(self, "output_dir", os.path.join(self.run_dir, "landscape"))

    def validate(self):
        """Checks every value and combination before a model is loaded; the first problem
        is raised as an InputError naming its flag."""
        if not self.run_dir:
            raise InputError("--run_dir: required (a run trained with --save_trajectory_every)")
        if not self.mode or any(m not in MODES for m in self.mode):
            raise InputError(f"--mode={','.join(self.mode)}: choose from {', '.join(MODES)}")
        for name, minimum in MINIMUMS:
            if getattr(self, name) < minimum:
                raise InputError(f"--{name}={getattr(self, name)}: must be at least {minimum}")
        if self.lanczos_steps < self.top_k:
            raise InputError(f"--lanczos_steps={self.lanczos_steps}: must be at least --top_k="
                             f"{self.top_k} (each step gives one Ritz value)")
        if self.hutchinson_probes == 1:
            raise InputError("--hutchinson_probes=1: use 0 (no trace) or at least 2 (one probe "
                             "has no standard error)")
        if not 0 <= self.plane_margin < np.inf:
            raise InputError(f"--plane_margin={self.plane_margin}: must be 0 or more")
        if not self.loss_rise > 0:
            raise InputError(f"--loss_rise={self.loss_rise}: must be positive")
        if not epsilons_ok(self.epsilon):
            raise InputError(f"--epsilon={_joined(self.epsilon)}: expected positive numbers")
        for name, choices in (("direction", DIRECTIONS), ("normalization", NORMALIZATIONS),
                              ("biasbn", BIASBN), ("direction_scale", DIRECTION_SCALES),
                              ("hvp", HVP_METHODS)):  # the enum flags' choices, for code
            if getattr(self, name) not in choices:
                raise InputError(f"--{name}={getattr(self, name)}: must be one of "
                                 + ", ".join(choices))
        if self.direction == "pca":
            for name, default in (("normalization", "matrix"), ("biasbn", "ignore"),
                                  ("direction_scale", "delta")):
                if getattr(self, name) != default:
                    raise InputError(f"--{name}={getattr(self, name)}: applies to random "
                                     "directions, not --direction=pca")
        for name, mode in (("hessian_groups", "hessian"), ("hessian_trajectory", "hessian")):
            if getattr(self, name) and mode not in self.mode:
                raise InputError(f"--{name}: needs --mode={mode}")
        if "three_point" in self.mode:
            other = [m for m in self.mode if m not in ("three_point",) + CURVATURE_MODES]
            if other:
                raise InputError(f"--mode={','.join(self.mode)}: three_point combines only "
                                 "with hessian and sharpness (at both minima); run "
                                 f"{','.join(other)} in a separate call")
            if not self.compare_run_dir:
                raise InputError("--mode=three_point: needs --compare_run_dir (θ_b; --run_dir "
                                 "is θ_a)")
        for name in RANGES:
            values = getattr(self, name)
            if values is None and name == "range_alpha":  # the --direction's default
                continue
            if problem := range_problem(values or ()):
                raise InputError(f"--{name}={_joined(values or ())}: {problem}")

    @property
    def run_dirs(self):
        """--run_dir, then --compare_run_dir if given."""
        return [self.run_dir] + ([self.compare_run_dir] if self.compare_run_dir else [])

    @classmethod
    def from_flags(cls, flag_values):
        """The config of parsed `flag_values` (cli.FLAGS). The list flags' text becomes
        numbers here, and a list that is not what its flag needs is refused with the text
        as typed; --range_alpha left out follows --direction."""
        values = {f.name: flag_values[f.name].value for f in dataclasses.fields(cls)}
        values["mode"] = tuple(values["mode"])
        for name in RANGES:
            text = flag_values[name].value
            try:
                values[name] = tuple(float(v) for v in text)
            except ValueError:
                values[name] = ()
            if problem := range_problem(values[name]):
                raise InputError(f"--{name}={','.join(text)}: {problem}")
        if not flag_values["range_alpha"].present:
            values["range_alpha"] = None
        text = flag_values["epsilon"].value
        try:
            values["epsilon"] = tuple(float(e) for e in text)
        except ValueError:
            values["epsilon"] = ()
        if not epsilons_ok(values["epsilon"]):
            raise InputError(f"--epsilon={','.join(text)}: expected positive numbers")
        return cls(**values)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        return cls(**values)

    def save(self, path):
        atomic_write_json(path, self.to_dict())
