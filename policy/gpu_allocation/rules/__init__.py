"""Rule families of the policy pack, one module each.

- :mod:`rules.ownership`: single-allocation-owner, operator-device-plugin-disabled,
  gpu-cluster-excludes-standalone-dra, compute-domain-crds-one-owner, nfd-one-owner,
  ownership-ledger-consistent, operator-cr-exclusive
- :mod:`rules.targeting`: no-auto-mode-targeting, gpu-discovery-affinity-kept
- :mod:`rules.workloads`: smoke-job-hardened, smoke-job-run-approved, gpu-request-shape,
  no-visible-devices-override, no-dual-allocation
- :mod:`rules.sharing`: shared-gpu-resource-name, time-slicing-config-attached, mig-strategy-consistent
- :mod:`rules.dra`: dra-api-current, dra-feature-gates-allowlisted,
  dra-webhook-needs-tls
- :mod:`rules.drivers`: driver-ownership-consistent,
  driver-verification-declared, chart-version-pinned, operator-hooks-kept
- :mod:`rules.props`: property plumbing (SDK proxies to plain data, unknowns, accessors, policy config)
- :mod:`rules.shapes`: Kubernetes shapes (a resource and what it is, pod templates, containers, placement)
- :mod:`rules.installations`: the GPU installation model (installs, what they render, the ledger)
- :mod:`rules.readers`: values read as their consumers read them (Helm truthiness and chart defaults, a
  container's effective env, DRA feature gates, time-slicing selection) and findings as records, so a value
  that cannot be read is a violation (fail closed)
- :mod:`rules.parsing`: bounded JSON/YAML reading, so a hostile value is "cannot tell", never a crash
"""
