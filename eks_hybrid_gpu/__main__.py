"""`python -m eks_hybrid_gpu` is the `eks-hybrid-gpu` command."""

import sys

from eks_hybrid_gpu.cli import main

sys.exit(main())
