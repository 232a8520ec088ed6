"""Runs (I/O orchestration): a spec against an engine — repeats, sweeps, capacity searches —
and the gate of one measurement against its stored baseline (``gating``)."""
