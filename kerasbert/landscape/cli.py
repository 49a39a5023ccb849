"""`python -m kerasbert.landscape --run_dir=<run> [--compare_run_dir=<run>]`: the loss
landscape, trajectory and layer analysis of finished runs, as PNGs with CSV/NPZ beside.

    --mode=1d,2d,trajectory,layers,rollback (the default), hessian, sharpness
    1d        θ(α) = θ0 + α(θ1 − θ0): 1d.csv, 1d.png
    2d        θ1 + α·d1 + β·d2 on a grid × grid lattice, trajectory projected, and how far
              off the plane each checkpoint lies: 2d_<run>.npz, 2d.csv, 2d.png (contours),
              2d_surface.png (3D), 2d_trajectory.csv, agreement.csv
              --direction=random: d1 = δ1 = θ1 − θ0, d2 random ⊥ δ1 (see directions.py)
              --direction=random_pair: d1, d2 both random (Li et al.'s plots), d2 ⊥ d1
              --direction=pca: the trajectory's top two principal directions, ‖d‖ = ‖δ1‖
              --normalization=matrix|filter, --biasbn=ignore|keep: how random
              directions are normalised; --direction_scale=delta|weights|loss_rise
    trajectory  loss and error at every saved checkpoint (convergence by step):
              trajectory.csv, trajectory.png
    layers    ‖θ1ˡ − θ0ˡ‖ / ‖θ0ˡ‖ per layer: layers.csv, layers.png
    rollback  dev metrics with layers reset to θ0: rollback.csv, rollback.png
    hessian   the training loss's Hessian at θ1: top-k eigenvalues (Lanczos), trace
              (Hutchinson), per layer group, λ_max at every checkpoint (see hessian.py):
              hessian.json, hessian.md, hessian.png
    sharpness ε-sharpness at θ1 (largest loss rise in a filter-normalised ball):
              sharpness.json, sharpness.md, sharpness.png
    three_point  the plane through θ0, θ_a (--run_dir's θ1) and θ_b (--compare_run_dir's
              θ1), e.g. a failed and a successful seed (Mosbach et al. 2021), the straight
              path θ_a → θ_b and its barrier: three_point.json, three_point.md,
              three_point.png, three_point.csv, three_point_path.csv, three_point.npz;
              with hessian and/or sharpness, those at θ_a and θ_b (see three_point.py)

The runs must have been trained with --save_trajectory_every=N. A compared run (e.g. the
same task from --init_checkpoint=random) is drawn beside the first on the same scales.

This module only defines the flags and turns them into one LandscapeConfig (config.py);
analyse.analyse_runs does the work, so code can call it with a config of its own.
"""

import sys

from absl import flags

from kerasbert import command
from kerasbert.errors import InputError
from kerasbert.landscape import config as config_lib
from kerasbert.landscape.analyse import analyse_runs
from kerasbert.landscape.config import LandscapeConfig

FLAGS = flags.FlagValues()  # its own: the training flags (--data_dir, --seed …) stay apart

flags.DEFINE_string("run_dir", None, "The finished run to analyse (trained with "
                    "--save_trajectory_every).", flag_values=FLAGS)
flags.DEFINE_string("compare_run_dir", None, "A second run of the same task (e.g. from "
                    "--init_checkpoint=random) drawn beside the first on the same scales; with "
                    "--mode=three_point, θ_b (--run_dir is θ_a).",
                    flag_values=FLAGS)
flags.DEFINE_string("output_dir", None, "Where the PNG/CSV/NPZ files go. Default: "
                    "<run_dir>/landscape.", flag_values=FLAGS)
flags.DEFINE_string("data_dir", None, "The task's data folder. Default: the run's own "
                    "--data_dir (else the bundled sample).", flag_values=FLAGS)
flags.DEFINE_list("mode", list(config_lib.DEFAULT_MODES), "What to compute: any of 1d, 2d, "
                  "trajectory, layers, rollback, hessian, sharpness (default: all but the last "
                  "two); or three_point (needs --compare_run_dir), alone or with hessian and "
                  "sharpness.",
                  flag_values=FLAGS)
flags.DEFINE_integer("train_sample", 256, "Training examples the losses are measured on "
                     "(a fixed random subset of the run's training data; 0 = all).",
                     flag_values=FLAGS)
flags.DEFINE_integer("dev_sample", 256, "Dev examples the errors are measured on (0 = all).",
                     flag_values=FLAGS)
flags.DEFINE_integer("batch_size", 128, "Evaluation batch size.", flag_values=FLAGS)
flags.DEFINE_integer("points_1d", 21, "Points along α in 1D (with --mode=three_point: along "
                     "the straight path θ_a → θ_b).", flag_values=FLAGS)
flags.DEFINE_list("range_1d", ["-0.5", "1.5"], "α range of the 1D interpolation (θ0 at 0, "
                  "θ1 at 1).", flag_values=FLAGS)
flags.DEFINE_integer("grid", 11, "Points per axis of the 2D grid (grid² evaluations).",
                     flag_values=FLAGS)
flags.DEFINE_list("range_alpha", ["-1.5", "0.5"], "α range of the 2D grid around θ1, in "
                  "units of δ1 (θ0 lies at α = -1 with --direction=random); with "
                  "--direction=random_pair the default is -1,1.", flag_values=FLAGS)
flags.DEFINE_list("range_beta", ["-1", "1"], "β range of the 2D grid.", flag_values=FLAGS)
flags.DEFINE_enum("direction", "random", list(config_lib.DIRECTIONS), "The 2D plane: "
                  "δ1 and a random direction (random), two random directions (random_pair, "
                  "Li et al.'s), or the trajectory's top two principal directions (pca).",
                  flag_values=FLAGS)
flags.DEFINE_enum("normalization", "matrix", list(config_lib.NORMALIZATIONS),
                  "How a random direction is normalised: each weight matrix to the norm of the "
                  "same matrix of θ1 (matrix), or each filter (one output unit's weights, one "
                  "embedding row) to the norm of the same filter (filter, Li et al.'s).",
                  flag_values=FLAGS)
flags.DEFINE_enum("biasbn", "ignore", list(config_lib.BIASBN),
                  "Biases and LayerNorm parameters in random directions: zero (ignore, "
                  "loss-landscape's --xignore biasbn) or perturbed, each vector normalised to "
                  "its own norm (keep).",
                  flag_values=FLAGS)
flags.DEFINE_enum("direction_scale", "delta", list(config_lib.DIRECTION_SCALES), "Length of "
                  "the random directions: ‖δ1‖ (delta), the weights' own norm per matrix or "
                  "filter (weights, loss-landscape's), or so long that the training loss "
                  "rises by --loss_rise at the far edge of the axis' range (loss_rise).",
                  flag_values=FLAGS)
flags.DEFINE_float("loss_rise", 1.0, "With --direction_scale=loss_rise: the training-loss "
                   "rise above θ1 at the edge of each random axis.", flag_values=FLAGS)
flags.DEFINE_float("plane_margin", 0.3, "--mode=three_point: how far the grid reaches beyond "
                   "θ0, θ_a and θ_b, as a fraction of the larger side of the box around them.",
                   flag_values=FLAGS)
flags.DEFINE_integer("top_k", 3, "--mode=hessian: how many of the largest Hessian "
                     "eigenvalues to estimate.", flag_values=FLAGS)
flags.DEFINE_integer("lanczos_steps", 20, "--mode=hessian: Lanczos steps (one Hessian-vector "
                     "product each) per spectrum; at least --top_k.", flag_values=FLAGS)
flags.DEFINE_integer("hutchinson_probes", 20, "--mode=hessian: Rademacher probes of the "
                     "trace estimate (one Hessian-vector product each; 0 = no trace).",
                     flag_values=FLAGS)
flags.DEFINE_boolean("hessian_groups", False, "--mode=hessian: also the top eigenvalues of "
                     "each layer group's own Hessian block (embeddings, each transformer "
                     "layer, pooler, head): --lanczos_steps products per group.",
                     flag_values=FLAGS)
flags.DEFINE_boolean("hessian_trajectory", False, "--mode=hessian: also λ_max at every saved "
                     "checkpoint: --lanczos_steps products per checkpoint.", flag_values=FLAGS)
flags.DEFINE_enum("hvp", "double_backward", list(config_lib.HVP_METHODS), "--mode=hessian: "
                  "how Hessian-vector products are taken (both exact; see hessian.py).",
                  flag_values=FLAGS)
flags.DEFINE_integer("hessian_batch_size", 32, "Batch size of Hessian-vector products and "
                     "gradients (--mode=hessian, sharpness): their memory grows with it.",
                     flag_values=FLAGS)
flags.DEFINE_list("epsilon", ["0.001", "0.01"], "--mode=sharpness: ball radii ε, each filter "
                  "may move by ε times its own norm.", flag_values=FLAGS)
flags.DEFINE_integer("ascent_steps", 10, "--mode=sharpness: projected gradient-ascent steps "
                     "(one gradient each) per ε.", flag_values=FLAGS)
flags.DEFINE_integer("seed", 0, "Seed of the random direction and the samples.",
                     flag_values=FLAGS)


def _main(argv):
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    analyse_runs(LandscapeConfig.from_flags(FLAGS))
    return 0


def main(argv=None):
    """The command: `argv` (default sys.argv) -> LandscapeConfig -> analyse_runs. A bad
    flag or input is one line on stderr and exit status 2 (kerasbert/command.py)."""
    try:
        return command.run(_main, FLAGS, argv=sys.argv if argv is None else argv,
                           usage=lambda: command.module_usage(__name__, FLAGS))
    finally:
        FLAGS.unparse_flags()  # a second in-process call starts from the defaults
