"""`python -m eks_hybrid_gpu.hostcheck`."""

from eks_hybrid_gpu.hostcheck import main

raise SystemExit(main())
