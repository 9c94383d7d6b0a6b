"""`python -m signoff ...`: the `signoff` command where its script is not on PATH."""

import sys

from signoff.cli import main

sys.exit(main())
