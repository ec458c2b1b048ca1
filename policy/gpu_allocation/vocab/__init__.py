"""Leaf vocabulary shared by the program and the pack: names, grammars and GPU facts. No Pulumi imports.

The program (`components/`) imports these modules; they import nothing from the program, so a published pack
carries every rule it applies.
"""
