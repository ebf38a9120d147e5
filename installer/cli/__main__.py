"""``python -m installer.cli`` runs the vigil CLI."""

import sys

from vigil.installer.cli import main

sys.exit(main())
