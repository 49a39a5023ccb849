"""python -m kerasbert.experiments [--list | NAME --flags...]: list or run an experiment."""

import importlib
import sys

from kerasbert import plugins
from kerasbert.errors import guarded

USAGE = ("usage: python -m kerasbert.experiments --list\n"
         "       python -m kerasbert.experiments NAME --flags...   (NAME --help: its flags)")


def listing(registry):
    """One line per registered experiment: name, what it reproduces, what it does."""
    specs = [spec for spec, _ in sorted(registry.experiments.values(), key=lambda x: x[0].name)]
    width = max((len(spec.name) for spec in specs), default=0)
    lines = []
    for spec in specs:
        what = f"{spec.reproduces}: {spec.description}" if spec.reproduces else spec.description
        lines.append(f"  {spec.name:<{width}}  {what}")
    return "experiments:\n" + "\n".join(lines)


def main(argv=None):
    argv = sys.argv if argv is None else argv
    registry = plugins.registry()
    if len(argv) < 2 or argv[1] in ("--list", "--help", "-h"):
        if len(argv) < 2 or argv[1] != "--list":
            print(USAGE)
        print(listing(registry))
        return 0 if len(argv) >= 2 else 2
    return guarded(run_experiment)(registry, argv[1], argv[2:])


def run_experiment(registry, name, args):
    """Imports the experiment's module (an unknown name: InputError) and runs it on args."""
    spec = registry.experiment(name)
    module = importlib.import_module(spec.module)
    return module.run([f"{sys.argv[0]} {spec.name}", *args])


if __name__ == "__main__":
    sys.exit(main())
