"""The landscape's files: the CSV/NPZ/PNG/JSON/Markdown of one or two analysed runs
(`analyse.analyse` results), and summary.json, which accumulates over invocations."""

import os

import numpy as np

from kerasbert.io_utils import (
    atomic_write_csv,
    atomic_write_json,
    atomic_write_text,
    read_json_object,
    replaced_whole,
)
from kerasbert.landscape import plots


def _slug(label):
    return "".join(c if c.isalnum() else "_" for c in label.lower()).strip("_")


def write_npz(path, **arrays):
    with replaced_whole(path, suffix=".npz") as tmp:
        np.savez(tmp, **arrays)


def _number(value, error=None):
    if value is None or not np.isfinite(value):
        return "—"
    return f"{value:.4g}" if error is None else f"{value:.4g} ± {error:.2g}"


def hessian_markdown(hessians):
    """hessian.md: the numbers of hessian.json as tables."""
    first = next(iter(hessians.values()))
    k = len(first["top_eigenvalues"])
    lines = ["# Hessian of the training loss at θ1", "",
             f"Mean training loss over {first['sample']} training rows, inference mode (no "
             f"dropout); {first['lanczos_steps']} Lanczos steps, Hessian-vector products by "
             f"{first['hvp']}. ± after an eigenvalue: its Lanczos residual bound ‖Hy − λy‖; "
             "after the trace: the standard error over the Rademacher probes.", "",
             "| run | " + " | ".join(f"λ{i + 1}" for i in range(k))
             + " | λ_min | trace (probes) | HVPs/s |",
             "|---|" + "---|" * (k + 3)]
    for label, h in hessians.items():
        eigen = [_number(v, b) for v, b in zip(h["top_eigenvalues"], h["residual_bounds"])]
        trace = (f"{_number(h['trace'], h['trace_standard_error'])} ({h['probes']})"
                 if "trace" in h else "—")
        lines.append(f"| {label} | " + " | ".join(eigen)
                     + f" | {_number(h['lambda_min'], h['lambda_min_residual_bound'])} | "
                     f"{trace} | {h['hvps_per_second']:.3g} |")
    # the per-group table only where a group has a number (a trace's probes or
    # --hessian_groups): with neither it would be a table of dashes
    if any(g.get("trace") is not None or g.get("top_eigenvalues")
           for h in hessians.values() for g in h["groups"]):
        lines += ["", "## Per layer group", "",
                  "Block Hessians H_gg (the other weights fixed): trace from the same probes, "
                  "λ1 from its own Lanczos run (--hessian_groups).", "",
                  "| run | group | parameters | trace | λ1 of the block |",
                  "|---|---|---|---|---|"]
        for label, h in hessians.items():
            for g in h["groups"]:
                top = g.get("top_eigenvalues")
                lines.append(f"| {label} | {g['group']} | {g['parameters']} | "
                             f"{_number(g.get('trace'), g.get('trace_standard_error'))} | "
                             f"{_number(top[0], g['residual_bounds'][0]) if top else '—'} |")
    if all("trajectory" in h for h in hessians.values()):
        lines += ["", "## λ_max along the trajectory", "", "| run | step | λ_max | λ_min |",
                  "|---|---|---|---|"]
        for label, h in hessians.items():
            lines += [f"| {label} | {row['step']} | "
                      f"{_number(row['lambda_max'], row['residual_bound'])} | "
                      f"{_number(row['lambda_min'])} |" for row in h["trajectory"]]
    return "\n".join(lines) + "\n"


def sharpness_markdown(tables):
    """sharpness.md: ε-sharpness per run and ε."""
    lines = ["# ε-sharpness at θ1", "",
             "The largest rise of the mean training loss found by projected gradient ascent "
             "within the filter-normalised ball ‖y_f‖ ≤ ε‖θ1_f‖ (every filter moves by at most "
             "ε times its own norm); a lower bound of the true maximum. Keskar = "
             "100 · rise / (1 + L(θ1)).", "",
             "| run | ε | biases/LayerNorm | sample | L(θ1) | max rise | Keskar (%) | ascent steps |",
             "|---|---|---|---|---|---|---|---|"]
    for label, rows in tables.items():
        lines += [f"| {label} | {r['epsilon']:g} | {r['biasbn']} | {r['sample']} | "
                  f"{r['loss']:.4g} | {r['rise']:.4g} | {r['keskar']:.4g} | {r['steps']} |"
                  for r in rows]
    return "\n".join(lines) + "\n"


def write_results(results, output_dir, direction):
    """The CSV/NPZ/PNG files of one or two analysed runs into `output_dir`; returns the files
    written. `direction` (LandscapeConfig.direction) is recorded with a 2D result."""
    os.makedirs(output_dir, exist_ok=True)
    written = []

    def out(name):
        written.append(os.path.join(output_dir, name))
        return written[-1]

    if all("1d" in r for r in results):
        atomic_write_csv(out("1d.csv"), [{"run": r["label"], **row} for r in results for row in r["1d"]])
        plots.plot_1d({r["label"]: r["1d"] for r in results}, out("1d.png"))
    if all("2d" in r for r in results):
        rows, agreement = [], []
        for r in results:
            s = r["2d"]
            arrays = {k: np.asarray(v) for k, v in s.items()
                      if isinstance(v, np.ndarray)}
            write_npz(out(f"2d_{_slug(r['label'])}.npz"), steps=np.asarray(r["steps"]), **arrays)
            metric_keys = [k for k, v in arrays.items()
                           if v.ndim == 2 and k != "trajectory"]
            for j, b in enumerate(s["betas"]):
                for i, a in enumerate(s["alphas"]):
                    rows.append({"run": r["label"], "alpha": float(a), "beta": float(b),
                                 **{k: float(arrays[k][j, i]) for k in metric_keys}})
            agreement.append({"run": r["label"], **s["agreement"], **s["flatness"],
                              "points_per_second": round(s["points_per_second"], 4)})
        atomic_write_csv(out("2d.csv"), rows)
        atomic_write_csv(out("agreement.csv"), agreement)
        atomic_write_csv(out("2d_trajectory.csv"), [
            {"run": r["label"], "step": step, "alpha": float(a), "beta": float(b),
             "distance_from_theta1": float(length), "distance_from_plane": float(distance),
             "relative_distance_from_plane": float(distance / length) if length > 0 else 0.0}
            for r in results for step, (a, b), distance, length in zip(
                r["steps"], r["2d"]["trajectory"], r["2d"]["trajectory_distance_from_plane"],
                r["2d"]["trajectory_distance_from_theta1"])])
        plots.plot_2d({r["label"]: r["2d"] for r in results}, out("2d.png"))
        plots.plot_surface_3d({r["label"]: r["2d"] for r in results}, out("2d_surface.png"))
    if all("trajectory" in r for r in results):
        atomic_write_csv(out("trajectory.csv"), [{"run": r["label"], **row} for r in results
                                          for row in r["trajectory"]])
        plots.plot_trajectory({r["label"]: r["trajectory"] for r in results},
                              out("trajectory.png"))
    if all("layers" in r for r in results):
        atomic_write_csv(out("layers.csv"), [{"run": r["label"], **row} for r in results
                                      for row in r["layers"]])
        plots.plot_layers({r["label"]: r["layers"] for r in results}, out("layers.png"))
    if all("rollback" in r for r in results):
        atomic_write_csv(out("rollback.csv"), [{"run": r["label"], **row} for r in results
                                        for row in r["rollback"]])
        first = results[0]["rollback"][0]
        metric = "dev_accuracy" if "dev_accuracy" in first else next(
            k for k in first if k.startswith("dev_") and k != "dev_loss")
        plots.plot_rollback({r["label"]: r["rollback"] for r in results}, out("rollback.png"),
                            metric)
    if all("hessian" in r for r in results):
        hessians = {r["label"]: r["hessian"] for r in results}
        atomic_write_json(out("hessian.json"), hessians)
        atomic_write_text(out("hessian.md"), hessian_markdown(hessians))
        plots.plot_hessian(hessians, out("hessian.png"))
    if all("sharpness" in r for r in results):
        tables = {r["label"]: r["sharpness"] for r in results}
        atomic_write_json(out("sharpness.json"), tables)
        atomic_write_text(out("sharpness.md"), sharpness_markdown(tables))
        plots.plot_sharpness(tables, out("sharpness.png"))
    # summary.json accumulates over invocations (e.g. 1D on a large sample, 2D on a small one)
    path = out("summary.json")
    summary = read_json_object(path) if os.path.exists(path) else {}
    for r in results:
        entry = summary.setdefault(r["label"], {})
        entry["steps"] = r["steps"]
        entry["run_dir"] = os.path.abspath(r["run_dir"])  # where the landscape_findings experiment
        # finds the run's history and settings
        if "2d" in r:
            entry.update(agreement=r["2d"]["agreement"], flatness=r["2d"]["flatness"],
                         direction=direction,
                         points_per_second=r["2d"]["points_per_second"],
                         explained_variance=r["2d"]["explained_variance"])
        if "hessian" in r:
            entry["hessian"] = {k: r["hessian"].get(k) for k in (
                "sample", "top_eigenvalues", "residual_bounds", "lambda_min", "trace",
                "trace_standard_error", "hvps_per_second")}
        if "sharpness" in r:
            entry["sharpness"] = [{k: row[k] for k in ("epsilon", "loss", "rise", "keskar")}
                                  for row in r["sharpness"]]
    atomic_write_json(path, summary)
    return written


def _point_metrics(result):
    """The metric columns of the points' table: losses, then the dev metrics."""
    first = result["points"]["theta0"]["metrics"]
    return [k for k in ("train_loss", "dev_loss") if k in first] + sorted(
        k for k in first if k.startswith("dev_") and k != "dev_loss")


def three_point_markdown(result):
    """three_point.md: the points, the barriers and the curvature of three_point.json."""
    points, heads, lengths = result["points"], result["initial_heads"], result["lengths"]
    samples = result["samples"]
    metrics = _point_metrics(result)
    lines = ["# The plane through θ0, θ_a and θ_b", "",
             "A point (α, β) is θ0 + α·d1 + β·d2 with d1 = θ_a − θ0 and d2 the part of "
             "θ_b − θ0 orthogonal to d1, rescaled to ‖d1‖: the axes are orthogonal and in units "
             f"of ‖θ_a − θ0‖ = {lengths['theta_a_minus_theta0']:.4g} (‖θ_b − θ0‖ = "
             f"{lengths['theta_b_minus_theta0']:.4g}, ‖θ_b − θ_a‖ = "
             f"{lengths['theta_b_minus_theta_a']:.4g}, angle at θ0 "
             f"{result['angle_degrees']:.3g}°).", "",
             f"θ0's head: {heads['theta0_head']}; "
             + ("--compare_run_dir started from the same head." if heads["distance"] == 0 else
                f"--compare_run_dir's start differs from it in {' and '.join(heads['groups'])}"
                f" by {heads['distance']:.4g} ({heads['relative_distance']:.3g} of θ0's norm "
                "there), so θ0 is not its start."),
             f"Every point is evaluated on {samples['train']} training and {samples['dev']} dev "
             f"rows of {samples['from']}"
             + ("" if samples["same_samples"] else
                " (--compare_run_dir's own settings draw other rows)") + ".", "",
             "| point | run | (α, β) | " + " | ".join(metrics) + " |",
             "|---|---|---|" + "---|" * len(metrics)]
    for name, p in points.items():
        lines.append(f"| {name} | {p['label']} | ({p['alpha']:.4g}, {p['beta']:.4g}) | "
                     + " | ".join(_number(p["metrics"].get(k)) for k in metrics) + " |")
    gap = max(abs(p["on_plane"][k] - p["metrics"][k]) for p in points.values()
              for k in ("train_loss", "dev_loss") if k in p["metrics"])
    lines += ["", f"The plane reproduces the three points' losses to {gap:.2g}.", "",
              "## The straight path θ(α) = (1 − α)·θ_a + α·θ_b", "",
              f"{len(result['path'])} points, α from 0 to 1. Barrier: the largest height of the "
              "metric above the straight line between its values at θ_a and θ_b; above the "
              "ends: its largest value minus the larger end value.", "",
              "| metric | at θ_a | at θ_b | max (α) | barrier (α) | above the ends |",
              "|---|---|---|---|---|---|"]
    for key, b in result["barriers"].items():
        lines.append(f"| {key} | {b['start']:.4g} | {b['end']:.4g} | {b['max']:.4g} "
                     f"({b['alpha_of_max']:.3g}) | {b['barrier']:.4g} ({b['alpha']:.3g}) | "
                     f"{b['above_endpoints']:.4g} |")
    if result.get("curvature"):
        lines += ["", "## Curvature at the two minima", "",
                  "On the training sample above; hessian.md and sharpness.md hold every number.",
                  "", "| run | λ_max | λ_min | ε | ε-sharpness (Keskar %) |",
                  "|---|---|---|---|---|"]
        for r in result["curvature"]:
            h = r.get("hessian", {})
            top = h.get("top_eigenvalues", [None])[0]
            rows = r.get("sharpness") or [None]
            for row in rows:
                lines.append(f"| {r['label']} | {_number(top)} | {_number(h.get('lambda_min'))}"
                             f" | {row['epsilon'] if row else '—'} | "
                             f"{_number(row['keskar']) if row else '—'} |")
    return "\n".join(lines) + "\n"


def write_three_point(result, output_dir, direction):
    """three_point.json/.md/.png/.csv/_path.csv/.npz of three_point.three_point's `result`
    into `output_dir`, and hessian/sharpness files and summary.json of the two minima
    (write_results); returns the files written."""
    os.makedirs(output_dir, exist_ok=True)
    written = []

    def out(name):
        written.append(os.path.join(output_dir, name))
        return written[-1]

    grids = {k: v for k, v in result.items() if isinstance(v, np.ndarray) and v.ndim == 2}
    write_npz(out("three_point.npz"), alphas=result["alphas"], betas=result["betas"],
              points=np.array([[p["alpha"], p["beta"]] for p in result["points"].values()]),
              **grids)
    atomic_write_csv(out("three_point.csv"), [
        {"alpha": float(a), "beta": float(b), **{k: float(v[j, i]) for k, v in grids.items()}}
        for j, b in enumerate(result["betas"]) for i, a in enumerate(result["alphas"])])
    atomic_write_csv(out("three_point_path.csv"), result["path"])
    summary = {k: v for k, v in result.items()
               if k not in grids and k not in ("alphas", "betas", "curvature")}
    summary["grid"] = {"alphas": [float(a) for a in result["alphas"]],
                       "betas": [float(b) for b in result["betas"]]}
    if result.get("curvature"):
        summary["curvature"] = {
            r["label"]: {**({"lambda_max": r["hessian"]["top_eigenvalues"][0],
                             "lambda_min": r["hessian"]["lambda_min"]} if "hessian" in r else {}),
                         **({"sharpness": [{k: row[k] for k in ("epsilon", "loss", "rise",
                                                                  "keskar")}
                                           for row in r["sharpness"]]}
                            if "sharpness" in r else {})}
            for r in result["curvature"]}
    atomic_write_json(out("three_point.json"), summary)
    atomic_write_text(out("three_point.md"), three_point_markdown(result))
    plots.plot_three_point(result, out("three_point.png"))
    runs = result.get("curvature") or result["runs"]
    return written + write_results(runs, output_dir, direction)
