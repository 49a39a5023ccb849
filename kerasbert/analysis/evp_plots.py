"""The expected-validation-performance figure (matplotlib, headless): per table, the
expected best dev score against the runs started (left) and against the steps they cost
(right), a line per row with ± std of the best as a band."""

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from kerasbert.analysis.figures import save_figure  # noqa: E402


def plot_evp(results, path):
    """`results`: {table name: {"metric", "rows": [{"label", "curve": [{"n", "expected",
    "std", "steps", ...}]}]}} (kerasbert/evp_report.py's table_evp)."""
    names = list(results)
    fig, axes = plt.subplots(len(names), 2, figsize=(9.0, 3.2 * len(names)), squeeze=False)
    for (runs_ax, steps_ax), name in zip(axes, names):
        result = results[name]
        for i, row in enumerate(r for r in result["rows"] if r["curve"]):
            color = plt.cm.tab10(i % 10)
            curve = row["curve"]
            mean = [p["expected"] for p in curve]
            low = [p["expected"] - p["std"] for p in curve]
            high = [p["expected"] + p["std"] for p in curve]
            for ax, x in ((runs_ax, [p["n"] for p in curve]),
                          (steps_ax, [p.get("steps") for p in curve])):
                if any(v is None for v in x):
                    continue
                ax.plot(x, mean, "-o", markersize=3, color=color, label=row["label"])
                ax.fill_between(x, low, high, color=color, alpha=0.15)
        runs_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        runs_ax.set_xlabel("runs started (n)")
        steps_ax.set_xlabel("optimizer steps (n × a run's)")
        for ax in (runs_ax, steps_ax):
            ax.set_ylabel(f"expected best dev {result['metric']}")
            ax.grid(alpha=0.3)
        runs_ax.set_title(f"{name} (band: ± std of the best of n)", fontsize=9)
        if any(row["curve"] for row in result["rows"]):
            runs_ax.legend(fontsize=7)
    save_figure(fig, path, dpi=80)
