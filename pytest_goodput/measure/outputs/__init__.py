"""What the engine generated, kept as compact fingerprints for the output guard."""
