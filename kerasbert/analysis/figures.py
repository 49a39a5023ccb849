"""Writing a matplotlib figure to a PNG file (headless), shared by every plot module."""

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt

from kerasbert import storage
from kerasbert.io_utils import replaced_whole


def save_figure(fig, path, dpi):
    """Lays the figure out, writes the PNG beside its target and renames it (whole or not
    at all), and closes the figure."""
    fig.tight_layout()
    try:
        with replaced_whole(path, suffix=".png") as tmp:
            with storage.open_file(tmp, "wb") as f:  # a file object: gs:// paths too
                fig.savefig(f, dpi=dpi, format="png")
    finally:
        plt.close(fig)
