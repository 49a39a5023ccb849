"""Loss landscapes, optimization trajectories and layer analysis (Hao et al., 2019).

    training (--save_trajectory_every=N)  → <run>/trajectory/: θ0, every N steps, θ1
    python -m kerasbert.landscape --run_dir=<run> [--compare_run_dir=<random-init run>]
        → 1D interpolation θ0 → θ1, 2D surfaces around θ1 with the trajectory projected on
          them, per-layer change and layer rollback: PNGs with CSV/NPZ beside them
    python -m kerasbert.landscape --run_dir=<a> --compare_run_dir=<b> --mode=three_point
        → the plane through θ0, θ_a and θ_b (e.g. a failed and a successful seed) and the
          barrier on the straight path θ_a → θ_b

Modules: config (LandscapeConfig: what to analyse, made once from the flags), run
(rebuild a run and its data samples), analyse (one run's modes; every run, locked, to
files), directions (vectors in weight space), surface (loss/error at points of weight
space), plane (the 2D plane and its surface), layers (per-layer change, rollback), hessian
(HVPs, Lanczos, Hutchinson, ε-sharpness), curvature (those at a run's θ1), three_point
(the plane through θ0 and two runs' θ1, the path between them and its barrier), writers (the
CSV/NPZ/JSON/Markdown files), plots, cli (flags → LandscapeConfig → analyse_runs). Only cli
reads flags; trajectories are captured by kerasbert.training.trajectory.
"""
