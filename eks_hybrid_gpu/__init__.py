"""eks-hybrid-gpu: NVIDIA GPU hosts on EKS Hybrid Nodes, one allocation owner per cohort."""
