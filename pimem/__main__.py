"""``python -m pimem``: the ``pimem`` command."""

import sys

from pimem.cli.main import main

sys.exit(main())
