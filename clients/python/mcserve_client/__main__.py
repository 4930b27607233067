"""`python3 -m mcserve_client ...` runs the mcserve-client CLI (same as `-m mcserve_client.cli`)."""
import sys

from .cli import main

sys.exit(main())
