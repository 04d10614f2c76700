"""`python -m console` is `dflash-console`."""

import sys

from console.cli import main

sys.exit(main())
