"""Writing a matplotlib figure to a PNG file (headless), shared by every plot module."""

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt

from kerasbert.io_utils import replaced_whole


def save_figure(fig, path, dpi):
    """Lays the figure out, writes the PNG beside its target and renames it (whole or not
    at all), and closes the figure."""
    fig.tight_layout()
    try:
        with replaced_whole(path, suffix=".png") as tmp:
            fig.savefig(tmp, dpi=dpi)
    finally:
        plt.close(fig)
