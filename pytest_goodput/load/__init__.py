"""Load (I/O): one run of one spec, from prompts to raw exchanges.

``scenario.run_scenario`` is the entry point; ``plan`` says what every worker sends,
``coordinator`` executes the plan over a pool (``pools/``: this process, worker processes or
Ray actors), ``worker`` is the body every worker runs and ``health`` tells when the client,
not the server, set the pace. ``docs/architecture.md`` draws the route.
"""
