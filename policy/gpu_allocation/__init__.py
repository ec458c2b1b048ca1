"""The eks-hybrid-gpu policy pack as one importable package.

`policy/` is published alone (`pulumi policy publish`), so nothing in here may import from outside it. Inside
the package, modules import each other relatively: the same code then loads as `gpu_allocation.*` when the pack
runs (`policy/` is `sys.path[0]`) and as `policy.gpu_allocation.*` when the program imports its vocabulary.
"""
