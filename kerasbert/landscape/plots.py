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
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            ax.set_title(f"{label}: {key.replace('_', ' ')}", fontsize=9)
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
