"""Shared CLI plumbing of `kerasbert.pretraining.create_data` and `kerasbert.pretrain`: the
one way every kerasbert command parses its flags (kerasbert/command.py: --help, --helpfull,
--config, an input error as one line and exit status 2)."""

import sys

from absl import flags

from kerasbert import command
from kerasbert.errors import InputError


def run(main, prog):
    """`main()` as the command `prog` on absl's global flags; exits the process."""
    module = sys.modules[main.__module__]

    def entry(argv):
        if len(argv) > 1:
            raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
        return main()

    def usage():
        return command.module_usage(main.__module__, flags.FLAGS, doc=module.__doc__)

    sys.exit(command.run(entry, flags.FLAGS, usage=usage))
