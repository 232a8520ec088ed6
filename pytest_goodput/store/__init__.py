"""Stores (I/O): baseline files (validated, written atomically), the environment fingerprint,
and reading result files back as evidence for the judge."""
