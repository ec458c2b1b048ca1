"""What is recorded in the cluster, read once into typed objects: the ledger, the migration record, the Leases."""
