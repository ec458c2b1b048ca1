"""Entry point of the policy pack.

``python -m pulumi.policy <engine> policy`` (what ``--policy-pack policy`` and
``policy/analyzer`` run) executes this file with ``policy/`` as ``sys.path[0]``. Put the
repository root first so that ``policy.*`` and ``policy.gpu_allocation.vocab.labels`` import as
packages, then serve the pack.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policy.pack import serve

serve()
