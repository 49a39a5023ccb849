"""Shared CLI plumbing of `kerasbert.pretraining.create_data` and `kerasbert.pretrain`:
an input error becomes one line on stderr and exit status 2, as in `kerasbert.main`."""

import sys

from absl import app, flags

from kerasbert.errors import InputError, TrainingError


def run(main, prog):
    def guarded(argv):
        if len(argv) > 1:
            print(f"{prog}: error: unexpected arguments: {' '.join(argv[1:])}", file=sys.stderr)
            return 2
        try:
            return main()
        except (InputError, TrainingError) as e:
            if flags.FLAGS["verbose"].value:
                raise
            print(f"{prog}: error: {e}", file=sys.stderr)
            return 2 if isinstance(e, InputError) else 1

    def flags_parser(argv):
        try:
            return flags.FLAGS(argv)
        except flags.Error as e:
            print(f"{prog}: error: {e}", file=sys.stderr)
            sys.exit(2)

    app.run(guarded, flags_parser=flags_parser)
