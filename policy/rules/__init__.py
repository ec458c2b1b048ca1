"""Rule families of the policy pack, one module each.

- :mod:`policy.rules.ownership`: single-allocation-owner, operator-cr-exclusive
- :mod:`policy.rules.targeting`: no-auto-mode-targeting, gpu-discovery-affinity-kept
- :mod:`policy.rules.workloads`: smoke-job-hardened, gpu-request-shape,
  no-visible-devices-override, no-dual-allocation, shared-gpu-resource-name,
  mig-strategy-consistent
- :mod:`policy.rules.dra`: dra-api-current, dra-feature-gates-allowlisted,
  dra-webhook-needs-tls
- :mod:`policy.rules.drivers`: driver-ownership-consistent,
  driver-verification-declared, chart-version-pinned, operator-hooks-kept
- :mod:`policy.rules.k8s`: shared helpers (plain props, pod specs, selectors)
"""
