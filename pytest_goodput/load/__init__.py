"""Load (I/O): the client, the schedules and workloads, and the load driver that runs one scenario.

``scenario.run_scenario`` is the entry point; ``drive`` sends on schedule (open loop), by
users (closed loop) or all at once; ``shard`` spreads a run over worker processes; the
self-check tells when the client, not the server, set the pace.
"""
