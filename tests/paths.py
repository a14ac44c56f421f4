"""Where the shared, read-only test data lives."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KOA_SHARED_DIR", REPO.parent / "shared"))
SCENARIO = SHARED / "data/scenarios/unclean-election-3brokers"
REAL = SHARED / "data/real"
