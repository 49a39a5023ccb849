"""Figures for report.md: one run's curves, a sweep, a model-size grid (matplotlib, headless)."""

import math
import statistics

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from kerasbert.analysis.figures import save_figure


def _number(value):
    """A float from a history/CSV cell, or None for blanks and non-numbers."""
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _phase_boundaries(ax, rows):
    for i in range(1, len(rows)):
        if rows[i].get("phase") != rows[i - 1].get("phase"):
            ax.axvline(i + 0.5, color="grey", linestyle=":", label="unfreeze")


def plot_run_history(rows, path, main_metric, title=None):
    """Two panels over the epochs of history.csv: training loss, and the dev metrics
    (the main one bold; train accuracy beside dev accuracy shows over-fitting)."""
    fig, (loss_ax, dev_ax) = plt.subplots(1, 2, figsize=(8.4, 3.2))
    x = list(range(1, len(rows) + 1))
    labels = [("F" if r.get("phase") == "frozen" else "") + str(r.get("epoch", i + 1))
              for i, r in enumerate(rows)]
    loss_ax.plot(x, [_number(r.get("train_loss")) for r in rows], "-o", markersize=4,
                 color="tab:red", label="train loss")
    loss_ax.set_ylabel("train loss (mean over the epoch)")
    dev_ax.plot(x, [_number(r.get(f"dev_{main_metric}")) for r in rows], "-o", markersize=5,
                linewidth=2, color="tab:blue", label=f"dev {main_metric}")
    others = [k for k in (rows[0] if rows else {}) if k.startswith("dev_")
              and k != f"dev_{main_metric}"]
    for key in others[:4]:  # more lines than that is a table's job (metrics.json)
        dev_ax.plot(x, [_number(r.get(key)) for r in rows], "--", marker=".",
                    label=key.replace("_", " "))
    if main_metric == "accuracy" and any(_number(r.get("train_accuracy")) is not None
                                         for r in rows):
        dev_ax.plot(x, [_number(r.get("train_accuracy")) for r in rows], ":s", markersize=3,
                    color="grey", label="train accuracy")
    dev_ax.set_ylabel("dev metric")
    for ax in (loss_ax, dev_ax):
        _phase_boundaries(ax, rows)
        ax.set_xticks(x, labels)
        ax.set_xlabel("epoch (F: frozen-encoder phase)" if any(
            r.get("phase") == "frozen" for r in rows) else "epoch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=80)


def plot_sweep(runs, path, metric, title=None):
    """Left: the dev metric against the learning rate, one point per restart, the mean ±
    std as a bar and the winner starred. Right: every run's dev curve per epoch.

    `runs`: dicts with learning_rate, restart, name, value (the final dev metric or None),
    curve (dev metric per epoch) and best (bool).
    """
    rates = sorted({r["learning_rate"] for r in runs})
    position = {lr: i for i, lr in enumerate(rates)}
    colors = {lr: plt.cm.tab10(i % 10) for i, lr in enumerate(rates)}
    fig, (grid_ax, curve_ax) = plt.subplots(1, 2, figsize=(9.0, 3.4))
    x_of = {}  # each restart's point, spread a little around its learning rate
    for lr in rates:
        restarts = [r for r in runs if r["learning_rate"] == lr and r["value"] is not None]
        for i, r in enumerate(restarts):
            x_of[r["name"]] = position[lr] + (i - (len(restarts) - 1) / 2) * 0.06
        values = [r["value"] for r in restarts]
        grid_ax.scatter([x_of[r["name"]] for r in restarts], values, color=colors[lr],
                        zorder=3, s=22)
        if values:
            std = statistics.stdev(values) if len(values) > 1 else 0.0
            grid_ax.errorbar(position[lr] + 0.25, statistics.fmean(values), yerr=std, fmt="_",
                             color="black", capsize=4, markersize=14)
    for r in runs:
        if r.get("best") and r["value"] is not None:
            grid_ax.scatter([x_of[r["name"]]], [r["value"]], marker="*", s=180, color="gold",
                            edgecolor="black", zorder=4, label=f"best: {r['name']}")
        curve = r.get("curve") or []
        if curve:
            curve_ax.plot(range(1, len(curve) + 1), curve, "-o", markersize=3, alpha=0.8,
                          color=colors[r["learning_rate"]],
                          linewidth=2.2 if r.get("best") else 1.0)
    grid_ax.set_xticks(range(len(rates)), [f"{lr:g}" for lr in rates])
    grid_ax.set_xlim(-0.5, len(rates) - 0.5)
    grid_ax.set_xlabel("learning rate (points: restarts; bar: mean ± std)")
    grid_ax.set_ylabel(f"dev {metric}")
    grid_ax.grid(alpha=0.3)
    if any(r.get("best") for r in runs):
        grid_ax.legend(fontsize=7)
    for lr in rates:  # legend of the curves: the colour of each learning rate
        curve_ax.plot([], [], color=colors[lr], label=f"lr {lr:g}")
    curve_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    curve_ax.set_xlabel("epoch (all phases)")
    curve_ax.set_ylabel(f"dev {metric}")
    curve_ax.grid(alpha=0.3)
    curve_ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=80)


def plot_size_grid(rows, path, metric, title=None):
    """Dev metric against encoder parameters (log scale), each point labelled with its
    entry and a bar of ± one std over seeds where given. Random-init rows are one line (size
    is their only difference); each pre-trained row ("init" other than "random") is a point
    of its own, so the line never joins a pre-trained encoder to a random one."""
    from matplotlib.ticker import NullFormatter

    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    points = [r for r in rows if r["value"] is not None]
    pretrained = [r for r in points if r.get("init", "random") != "random"]
    random_rows = sorted((r for r in points if r not in pretrained),
                         key=lambda r: r["parameters"])
    for group, style, color, legend in ((random_rows, "o-", "tab:blue", "random init"),
                                        (pretrained, "s", "tab:orange", "pre-trained")):
        if not group:
            continue
        ax.errorbar([r["parameters"] for r in group], [r["value"] for r in group],
                    yerr=[r.get("std") or 0.0 for r in group], fmt=style, color=color,
                    capsize=3, label=legend)
    for r in points:  # pre-trained labels to the left: they sit at the right edge
        left = r in pretrained
        ax.annotate(r.get("label", r["size"]), (r["parameters"], r["value"]),
                    textcoords="offset points", xytext=(-6 if left else 4, 4), fontsize=8,
                    ha="right" if left else "left")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # the 2×10⁶, 3×10⁶… labels overlap
    ax.set_xlabel("encoder parameters")
    ax.set_ylabel(f"dev {metric}")
    ax.grid(alpha=0.3, which="both")
    if pretrained and random_rows:
        ax.legend(fontsize=8, loc="lower right")
    if title:
        ax.set_title(title, fontsize=10)
    save_figure(fig, path, dpi=80)

