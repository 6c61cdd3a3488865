"""Entry point of the training pass's child process (see child.py)."""

import sys

from .child import main

sys.exit(main())
