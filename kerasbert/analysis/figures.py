"""Writing a matplotlib figure to a PNG file (headless), shared by every plot module."""

import os
import tempfile

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt


def save_figure(fig, path, dpi):
    """Lays the figure out, writes the PNG beside its target and renames it (whole or not
    at all), and closes the figure."""
    fig.tight_layout()
    directory, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + name, suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.remove(tmp)
