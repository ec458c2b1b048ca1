"""The eks-hybrid-gpu CrossGuard policy pack.

``policy/__main__.py`` is what ``pulumi preview --policy-pack policy`` runs; everything it serves lives in
the self-contained package :mod:`policy.gpu_allocation` (``pack.py`` builds the pack, ``rules/`` holds one
module per rule family, ``vocab/`` the leaf vocabulary the program shares). Keep this module free of side
effects: tests import the rule modules.
"""
