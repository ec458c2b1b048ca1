"""The eks-hybrid-gpu CrossGuard policy pack.

``policy/__main__.py`` is what ``pulumi preview --policy-pack policy`` runs; the policies
live in :mod:`policy.rules` (one module per rule family) and :mod:`policy.pack` builds
the pack. Keep this module free of side effects: tests import the rule modules.
"""
