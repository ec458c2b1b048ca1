"""Entry point of the policy pack.

``python -m pulumi.policy <engine> policy`` (what ``--policy-pack policy`` and ``policy/analyzer`` run, and what
a published pack runs) executes this file with ``policy/`` as ``sys.path[0]``, so the pack loads as the
self-contained package ``gpu_allocation``: nothing outside ``policy/`` is imported.
"""

from gpu_allocation.pack import serve

serve()
