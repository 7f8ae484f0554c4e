"""Allow `python -m callstitch`."""

import sys

from ._cli import main

sys.exit(main())
