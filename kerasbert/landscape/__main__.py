import sys

from kerasbert.landscape.cli import main

sys.exit(main())
