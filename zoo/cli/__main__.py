"""`python -m zoo.cli`: the `zoo` command."""

import sys

from zoo.cli.main import main

sys.exit(main())
