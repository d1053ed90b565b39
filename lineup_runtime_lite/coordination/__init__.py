"""What differs between one runtime on its database and several nodes on one PostgreSQL
database (SPEC 15): the nodes' leases, owners and wake-ups (`coordination.nodes`)."""
