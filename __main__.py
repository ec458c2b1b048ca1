"""Pulumi entry point: everything lives in components.program; the environment is read here, and only here."""

import os
from pathlib import Path

from cluster.records.lease_records import HOLDER_ENV
from components.program import run
from eks_hybrid_gpu.localpaths import local_kubeconfig

# A `pulumi up` that `eks-hybrid-gpu migrate` started names the run holding the cohort's Lease (checked there).
run(Path(__file__).resolve().parent, local_kubeconfig=local_kubeconfig(), lease_holder=os.environ.get(HOLDER_ENV))
