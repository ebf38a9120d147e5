"""``python -m installer.cli`` runs the vigil CLI."""

import sys

from installer.cli import main

sys.exit(main())
