"""Entry point of the training pass's child process (see child.py)."""

import os
import sys

from .child import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
if "--compile" in sys.argv[1:]:
    sys.exit(code)  # inductor may still own compile workers: a normal shutdown
# Everything is written and flushed: skip the interpreter's teardown (module cleanup, torch's and
# CUDA's exit handlers), which cost a few hundred ms on the device machine, on the critical path
# of every probe and of the pass itself.
os._exit(code)
