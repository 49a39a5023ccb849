"""How a benchmark starts its other side, and which interpreter runs PyTorch.

A child process runs a module of this package, `python -m benchmarks.<name>`, in this
interpreter or in the PyTorch reference's, with the folder holding `benchmarks/` first on
its PYTHONPATH, so it works from any working folder. The PyTorch side needs torch and
transformers, which kerasbert never depends on: its interpreter is named by --torch_python or
by the environment variable KERASBERT_TORCH_PYTHON, never by a path of one machine.
"""

import os

from kerasbert.errors import InputError

TORCH_PYTHON_VARIABLE = "KERASBERT_TORCH_PYTHON"
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module_command(interpreter, module, *args):
    """The command line that runs benchmarks.<module> with `args` in `interpreter`."""
    return [interpreter, "-m", f"{__package__}.{module}", *map(str, args)]


def child_env(extra=None):
    """This process's environment, the checkout first on PYTHONPATH, plus `extra`."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([CHECKOUT, *paths]), **(extra or {})}


def add_torch_python_flag(parser, what="the PyTorch side; without it that side is skipped"):
    """--torch_python, its default taken from $KERASBERT_TORCH_PYTHON."""
    parser.add_argument("--torch_python", default=os.environ.get(TORCH_PYTHON_VARIABLE) or None,
                        help=f"an interpreter with torch and transformers for {what} "
                        f"(default: ${TORCH_PYTHON_VARIABLE})")


def missing_interpreter(value):
    """The one-line complaint when `value` names no executable file, else None."""
    if os.path.isfile(value) and os.access(value, os.X_OK):
        return None
    return f"--torch_python={value}: no such interpreter"


def require_torch_python(value):
    """`value` (the flag, or the environment's default) when one is given, else InputError
    in one line that says how to name one."""
    if not value:
        raise InputError(f"--torch_python: required (an interpreter with torch and "
                         f"transformers), or set {TORCH_PYTHON_VARIABLE}")
    return value
