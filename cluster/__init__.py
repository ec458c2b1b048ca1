"""The cluster layer: the one door to the live cluster, the one reader of its records, and its judgments.

Between the vocabulary (`policy/gpu_allocation/vocab`) below and the components and commands above; no Pulumi here.

- `cluster.client`: the kubeconfig, the request path, paging, watches, retries and one error map (`Kube`);
  every read and write of the program's preflight and of every command goes through it.
- `cluster.records`: what the program and the day-2 commands record in the cluster (the ledger, the migration
  record, the Leases), read into typed objects (`cluster.records.read.read_records`).
- `cluster.judge`: what the live cluster says about a stack or a node: the scoped read, the preflight's checks,
  who publishes and who holds each GPU, node facts, the Operator's boundary, replacements, owner changes, and a
  node's state in transit. They read the stack through `cluster.judge.stack_view`, never the config module.
- `cluster.findings`: the finding both the config's validation and the judgments report (a config path and a fix).

Imports point down: `judge` may use `records` and `client`, `records` may use `client`, `client` only the
vocabulary (`tests/unit/test_layers.py`).
"""
