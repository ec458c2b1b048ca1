"""Rules of the policy pack: one package per rule family, one module per rule, each declaration beside its validator.

Families (``pack.py`` serves their ``POLICIES`` in this order):

- :mod:`rules.ownership`: ``single_owner`` (single-allocation-owner), ``gpu_operator``
  (operator-device-plugin-disabled, gpu-cluster-excludes-standalone-dra, operator-cr-exclusive), ``cluster_scoped``
  (compute-domain-crds-one-owner, nfd-one-owner), ``ledger_consistent`` (ownership-ledger-consistent),
  ``operator_tolerations`` (operator-operand-tolerations-reviewed); ``cohorts`` is their cohort model, ``scope``
  the stacks they judge and ``operator_reach`` the Operator's allocator beside a standalone one of the other kind
- :mod:`rules.targeting`: no-auto-mode-targeting, gpu-discovery-affinity-kept
- :mod:`rules.workloads`: ``smoke_jobs`` (smoke-job-hardened, smoke-job-run-approved), ``smoke_job_token``
  (smoke-job-token-unmounted), ``request_shape``
  (gpu-request-shape), ``visible_devices`` (no-visible-devices-override), ``dual_allocation`` (no-dual-allocation)
- :mod:`rules.sharing`: ``time_slicing`` (shared-gpu-resource-name), ``config_attached``
  (time-slicing-config-attached), ``mig`` (mig-strategy-consistent); ``cohorts`` is the device-plugin cohorts
- :mod:`rules.dra`: ``api_current`` (dra-api-current), ``feature_gates`` (dra-feature-gates-allowlisted, with
  ``driver_gates``: how the driver reads its gates), ``webhook`` (dra-webhook-needs-tls), ``extended_resource_names``
  (dra-extended-resource-name-unique), ``mapped_name_publishers`` (dra-extended-resource-one-publisher),
  ``plain_requests`` (dra-extended-resource-request-served), ``claim_cohort`` (dra-claim-on-dra-cohort),
  ``mapping_gate`` (dra-extended-resource-gate-on)
- :mod:`rules.drivers`: ``driver_ownership`` (driver-ownership-consistent, driver-verification-declared),
  ``chart_versions`` (chart-version-pinned), ``operator_hooks`` (operator-hooks-kept)

What the rules read, bottom up:

- :mod:`rules.sdk_internals`: the one home of the pulumi-policy private internals the pack relies on (and of the one
  conversion of each object per analyzer request)
- :mod:`rules.declare`: one declaration of a stack or resource policy (the fields every rule sets), used by every rule
- :mod:`rules.props`: property plumbing (SDK proxies to plain data, unknowns, accessors, policy config)
- :mod:`vocab.parsing` (shared with the program): bounded JSON/YAML reading, so a hostile value is "cannot
  tell", never a crash
- :mod:`rules.findings`: findings as records (fail closed) and the words many policies share
- :mod:`rules.readers`: values read as their consumers read them (Helm truthiness and chart defaults, a
  container's effective env)
- :mod:`rules.shapes`: pod shapes (pod spec paths, containers, placement, field types)
- :mod:`rules.charts`: Helm resource types and chart identity (from the owner registry, ``vocab.owners``)
- :mod:`rules.resource`: one resource and what it is (:meth:`Resource.belongs_to <rules.resource.Resource.belongs_to>`
  is the one "is this object owner X's" predicate); :mod:`rules.operator_crs`, above it: the Operator's CRs (every
  import points down: ``tests/policy/test_consumer_readings.py`` checks the pack has no import circle)
- :mod:`rules.fail_closed`: the resource-validator wrapper that reports what it could not read
- :mod:`rules.installations`: one GPU install and what it renders; :mod:`rules.ledger`: the ledger ConfigMap;
  :mod:`rules.stack_view`: a stack's resources, installs and ledger; :mod:`rules.plugin_configs`: where a
  device plugin's configs come from; :mod:`rules.name_mapping`: the KEP-5004 name mapping (mapping classes, who
  publishes a name where, plain requests)
- :mod:`rules.cluster_version`: the cluster's Kubernetes version and gates, from the stack's config or the policy
  config (the only module that reads ``pulumi.runtime`` config)
"""
