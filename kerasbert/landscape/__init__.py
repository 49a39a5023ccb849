"""Loss landscapes, optimization trajectories and layer analysis (Hao et al., 2019).

    training (--save_trajectory_every=N)  → <run>/trajectory/: θ0, every N steps, θ1
    python -m kerasbert.landscape --run_dir=<run> [--compare_run_dir=<random-init run>]
        → 1D interpolation θ0 → θ1, 2D surfaces around θ1 with the trajectory projected on
          them, per-layer change and layer rollback: PNGs with CSV/NPZ beside them

Modules: trajectory (capture and read weights), directions (vectors in weight space),
surface (loss/error at points of weight space), layers (per-layer change, rollback),
plots, run (rebuild a run and its data samples), cli.
"""
