import sys

from gpudoctor.cli.main import main

sys.exit(main())
