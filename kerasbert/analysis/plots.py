"""Pictures of runs: training curves across phases (matplotlib, headless)."""

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt  # noqa: E402

from kerasbert.analysis.figures import save_figure


def plot_curves(runs, path, metric="accuracy", title=None):
    """One panel per run: train loss, train accuracy and dev metric per epoch, with the
    frozen → fine-tune boundary drawn as a dashed line.

    `runs` maps a label to its history rows (dicts as read from history.csv).
    """
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.4), squeeze=False,
                             sharey=True)
    for ax, (label, rows) in zip(axes[0], runs.items()):
        x = list(range(1, len(rows) + 1))
        for key, style in ((f"dev_{metric}", "-o"), ("train_accuracy", "--s")):
            values = [float(r[key]) if r.get(key) not in (None, "") else None for r in rows]
            if any(v is not None for v in values):
                ax.plot(x, values, style, label=key.replace("_", " "), markersize=4)
        phases = [r.get("phase") for r in rows]
        for i in range(1, len(phases)):
            if phases[i] != phases[i - 1]:
                ax.axvline(i + 0.5, color="grey", linestyle=":", label="unfreeze")
        ax.set_title(label)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(metric)
    axes[0][-1].legend(loc="lower right", fontsize=8)
    if title:
        fig.suptitle(title)
    save_figure(fig, path, dpi=90)
