"""spark-submit entry point of a checkout: ``spark-submit jobs/audit_offsets.py --log-dirs ... --output ...``.

Same arguments as ``kafka-offset-audit audit``.  Runs :func:`audit.submit.main` with this checkout's ``audit``
package (its ``sql/`` beside it).  An installed package (``pip install .``, a wheel) carries the same application
inside it: submit ``"$(kafka-offset-audit spark-app)"`` there.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from audit.submit import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
