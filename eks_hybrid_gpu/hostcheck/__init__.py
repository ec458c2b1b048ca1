"""GPU host preflight: checks a host against one allocation owner's floors and prints its inventory.

Standard library only, because it runs on the GPU host before anything else is installed there.
"""

from eks_hybrid_gpu.hostcheck.cli import main

__all__ = ["main"]
