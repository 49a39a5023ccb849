"""The landscape's pictures (matplotlib, headless). Runs compared side by side share their
axes and colour levels, so shapes can be compared by eye."""

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt
import numpy as np

from kerasbert.analysis.figures import save_figure

DPI = 80


def _save(fig, path):
    save_figure(fig, path, DPI)


def plot_1d(curves, path):
    """`curves`: {run label: rows with alpha, train_loss, dev_loss, dev_error}."""
    keys = [k for k in ("train_loss", "dev_loss", "dev_error")
            if all(k in r for rows in curves.values() for r in rows)]
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.0), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for label, rows in curves.items():
            ax.plot([r["alpha"] for r in rows], [r[key] for r in rows], "-o", markersize=3,
                    label=label)
        for x in (0.0, 1.0):
            ax.axvline(x, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("α   (θ0 at 0, θ1 at 1)")
        ax.set_title(key.replace("_", " "))
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    _save(fig, path)


def plot_trajectory(curves, path):
    """`curves`: {run label: rows with step, train_loss, dev_error}: convergence by step."""
    keys = [k for k in ("train_loss", "dev_error")
            if all(k in r for rows in curves.values() for r in rows)]
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.0), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for label, rows in curves.items():
            ax.plot([r["step"] for r in rows], [r[key] for r in rows], "-o", markersize=3,
                    label=label)
        ax.set_xlabel("training step")
        ax.set_title(key.replace("_", " ") + " at the saved checkpoints")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    _save(fig, path)


def _levels(arrays, count=14):
    values = np.concatenate([a[np.isfinite(a)].ravel() for a in arrays])
    low, high = float(values.min()), float(np.percentile(values, 90))
    if high <= low:
        high = low + 1e-6
    return np.linspace(low, high, count)


def plot_2d(surfaces, path, keys=("train_loss", "dev_error")):
    """`surfaces`: {run label: {"alphas", "betas", <metric>: [betas, alphas],
    "trajectory": [[α, β], ...], "axis_labels": (x, y)}}. One row per run, one column per
    metric; a column shares its contour levels across runs."""
    keys = [k for k in keys if all(k in s for s in surfaces.values())]
    fig, axes = plt.subplots(len(surfaces), len(keys),
                             figsize=(3.8 * len(keys), 3.2 * len(surfaces)), squeeze=False)
    for col, key in enumerate(keys):
        levels = _levels([s[key] for s in surfaces.values()])
        for row, (label, s) in enumerate(surfaces.items()):
            ax = axes[row][col]
            filled = ax.contourf(s["alphas"], s["betas"], s[key], levels=levels,
                                 cmap="viridis", extend="max")
            ax.contour(s["alphas"], s["betas"], s[key], levels=levels, colors="white",
                       linewidths=0.4)
            fig.colorbar(filled, ax=ax, shrink=0.85, format="%.3g")
            path_xy = np.asarray(s.get("trajectory", np.zeros([0, 2])))
            if len(path_xy):
                ax.plot(path_xy[:, 0], path_xy[:, 1], "-o", color="red", markersize=2.5,
                        linewidth=1)
                ax.plot(*path_xy[0], "s", color="orange", markersize=6, label="θ0")
                ax.plot(*path_xy[-1], "*", color="red", markersize=9, label="θ1")
            x_label, y_label = s.get("axis_labels", ("α", "β"))
            ax.set_xlabel(x_label, fontsize=8)
            ax.set_ylabel(y_label, fontsize=8)
            title = f"{label}: {key.replace('_', ' ')}"
            off, length = (np.asarray(s.get(k, [])) for k in (
                "trajectory_distance_from_plane", "trajectory_distance_from_theta1"))
            if len(path_xy) and (length > 0).any():  # points off the plane are not on it
                worst = float(np.max(off[length > 0] / length[length > 0]))
                title += f"\npath off the plane by up to {worst:.0%} of its distance to θ1"
            ax.set_title(title, fontsize=8)
    axes[0][0].legend(fontsize=7, loc="lower left")
    _save(fig, path)


def plot_layers(changes, path):
    """`changes`: {run label: rows with group, relative_change}; grouped bars."""
    groups = list(dict.fromkeys(r["group"] for rows in changes.values() for r in rows))
    width = 0.8 / max(len(changes), 1)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(groups) * len(changes) + 1.5), 3.0))
    for i, (label, rows) in enumerate(changes.items()):
        value = {r["group"]: r["relative_change"] for r in rows}
        ax.bar(np.arange(len(groups)) + i * width, [value.get(g, np.nan) for g in groups],
               width, label=label)
    ax.set_xticks(np.arange(len(groups)) + width * (len(changes) - 1) / 2)
    ax.set_xticklabels(groups, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("‖θ1 − θ0‖ / ‖θ0‖")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_rollback(tables, path, metric="dev_accuracy"):
    """`tables`: {run label: rows with rollback, <metric>}; one bar per rollback, the
    un-rolled-back value as a dashed line."""
    fig, axes = plt.subplots(1, len(tables), figsize=(4.2 * len(tables), 3.6), squeeze=False,
                             sharey=True)
    for ax, (label, rows) in zip(axes[0], tables.items()):
        names = [r["rollback"] for r in rows]
        bars = ax.barh(np.arange(len(rows)), [r[metric] for r in rows], color="tab:blue")
        ax.bar_label(bars, fmt="%.3f", fontsize=6, padding=2)
        ax.axvline(rows[0][metric], color="black", linestyle="--", linewidth=1)
        ax.set_yticks(np.arange(len(rows)))
        ax.set_yticklabels(names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(metric.replace("_", " "))
        ax.set_xlim(0, max(r[metric] for rs in tables.values() for r in rs) * 1.18)
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3, axis="x")
    _save(fig, path)


def plot_surface_3d(surfaces, path, key="train_loss"):
    """The `key` surface of each run as a 3D plot, one panel per run; all panels share the
    z axis and the colour scale, which end at the contour plot's top level (the 90th
    percentile of both runs' values): higher values are drawn at that level."""
    from mpl_toolkits.mplot3d import Axes3D  # noqa: F401 (registers the 3d projection)

    levels = _levels([s[key] for s in surfaces.values()])
    low, high = float(levels[0]), float(levels[-1])
    fig = plt.figure(figsize=(4.6 * len(surfaces), 4.0))
    for i, (label, s) in enumerate(surfaces.items()):
        ax = fig.add_subplot(1, len(surfaces), i + 1, projection="3d")
        a, b = np.meshgrid(s["alphas"], s["betas"])
        z = np.clip(s[key], low, high)
        ax.plot_surface(a, b, z, cmap="viridis", vmin=low, vmax=high, linewidth=0,
                        antialiased=True)
        ax.set_zlim(low, high)
        x_label, y_label = s.get("axis_labels", ("α", "β"))
        ax.set_xlabel(x_label.split(" (")[0])
        ax.set_ylabel(y_label.split(" (")[0])
        ax.set_title(f"{label}: {key.replace('_', ' ')}", fontsize=9)
    _save(fig, path)


def plot_hessian(hessians, path):
    """`hessians`: {run label: hessian.json entry}. Panels: the top eigenvalues (error
    bars: Lanczos residual bounds), per-group block traces and λ1 (where computed), λ_max
    at the checkpoints (where computed)."""
    panels = ["top"]
    if any("trace" in g or "top_eigenvalues" in g for h in hessians.values()
           for g in h["groups"]):
        panels.append("groups")
    if all("trajectory" in h for h in hessians.values()):
        panels.append("trajectory")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.2), squeeze=False)
    width = 0.8 / max(len(hessians), 1)
    for ax, panel in zip(axes[0], panels):
        for i, (label, h) in enumerate(hessians.items()):
            if panel == "top":
                x = np.arange(len(h["top_eigenvalues"])) + 1
                ax.errorbar(x + (i - 0.5) * 0.1, h["top_eigenvalues"], yerr=h["residual_bounds"],
                            fmt="o", capsize=3, label=label)
                ax.set_xticks(x)
                ax.set_xlabel("eigenvalue rank")
                ax.set_title("top Hessian eigenvalues at θ1", fontsize=9)
            elif panel == "groups":
                groups = [g["group"] for g in h["groups"]]
                key = "top_eigenvalues" if all("top_eigenvalues" in g for g in h["groups"]) \
                    else "trace"
                values = [g[key][0] if key == "top_eigenvalues" else g[key] for g in h["groups"]]
                errors = [g["residual_bounds"][0] if key == "top_eigenvalues"
                          else g.get("trace_standard_error", 0.0) for g in h["groups"]]
                ax.bar(np.arange(len(groups)) + i * width, values, width, yerr=errors,
                       capsize=2, label=label)
                ax.set_xticks(np.arange(len(groups)) + width * (len(hessians) - 1) / 2)
                ax.set_xticklabels(groups, rotation=45, ha="right", fontsize=7)
                ax.set_title("λ1 of each block" if key == "top_eigenvalues"
                             else "trace of each block", fontsize=9)
                ax.set_yscale("symlog", linthresh=1e-3)
            else:
                rows = h["trajectory"]
                ax.plot([r["step"] for r in rows], [r["lambda_max"] for r in rows], "-o",
                        markersize=3, label=label)
                ax.set_xlabel("training step")
                ax.set_title("λ_max at the saved checkpoints", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    _save(fig, path)


def plot_sharpness(tables, path):
    """`tables`: {run label: ε-sharpness rows}; the loss rise after each ascent step, one
    line per run and ε (a curve still climbing at the end: more steps would find more)."""
    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    for label, rows in tables.items():
        for r in rows:
            ax.plot(np.arange(len(r["rises"])), r["rises"], "-o", markersize=3,
                    label=f"{label}, ε = {r['epsilon']:g}")
    ax.set_xlabel("ascent step (0: the random start)")
    ax.set_ylabel("L(θ1 + y) − L(θ1)")
    ax.set_title("ε-sharpness: loss rise in the filter-normalised ball", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _save(fig, path)


def plot_three_point(result, path, keys=("train_loss", "dev_error")):
    """`result`: three_point.three_point's. One contour panel per metric with θ0, θ_a and
    θ_b marked and the straight path θ_a → θ_b drawn; a last panel with the metrics along
    that path against the straight line between its ends (the barrier is the gap)."""
    keys = [k for k in keys if k in result]
    fig, axes = plt.subplots(1, len(keys) + 1, figsize=(5.0 * (len(keys) + 1), 4.2),
                             squeeze=False)
    points = result["points"]
    a, b = points["theta_a"], points["theta_b"]
    markers = {"theta0": ("s", "orange"), "theta_a": ("*", "red"), "theta_b": ("*", "white")}
    x_label, y_label = result["axis_labels"]
    for ax, key in zip(axes[0], keys):
        levels = _levels([result[key]])
        filled = ax.contourf(result["alphas"], result["betas"], result[key], levels=levels,
                             cmap="viridis", extend="max")
        ax.contour(result["alphas"], result["betas"], result[key], levels=levels,
                   colors="white", linewidths=0.4)
        fig.colorbar(filled, ax=ax, shrink=0.85, format="%.3g")
        ax.plot([a["alpha"], b["alpha"]], [a["beta"], b["beta"]], "--", color="red",
                linewidth=1, label="θ_a → θ_b")
        for name, p in points.items():
            marker, colour = markers[name]
            ax.plot(p["alpha"], p["beta"], marker, color=colour, markeredgecolor="black",
                    markersize=10 if marker == "*" else 7, label=p["label"])
        ax.set_aspect("equal", adjustable="box")  # orthogonal axes of one unit: true shapes
        ax.set_xlabel(x_label, fontsize=8)
        ax.set_ylabel(y_label, fontsize=8)
        ax.set_title(key.replace("_", " ") + " on the plane", fontsize=9)
    axes[0][0].legend(fontsize=6, loc="best")
    ax = axes[0][-1]
    alphas = [r["alpha"] for r in result["path"]]
    for key in [k for k in ("train_loss", "dev_loss") if k in result["path"][0]]:
        values = [r[key] for r in result["path"]]
        line, = ax.plot(alphas, values, "-o", markersize=3, label=key.replace("_", " "))
        ax.plot([0.0, 1.0], [values[0], values[-1]], ":", color=line.get_color(), linewidth=1)
    if "dev_error" in result["path"][0]:  # another scale: its own axis
        error = ax.twinx()
        error.plot(alphas, [r["dev_error"] for r in result["path"]], "-s", color="grey",
                   markersize=3, linewidth=1, label="dev error (right axis)")
        error.set_ylabel("dev error", fontsize=8, color="grey")
        error.legend(fontsize=7, loc="lower right")
    barrier = result["barriers"].get("train_loss")
    title = "along θ_a → θ_b (dotted: the straight line)"
    if barrier:
        title += f"\ntraining-loss barrier {barrier['barrier']:.3g} at α = {barrier['alpha']:.2g}"
    ax.set_title(title, fontsize=8)
    ax.set_xlabel(f"α   (θ_a at 0: {a['label']}; θ_b at 1: {b['label']})", fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _save(fig, path)
