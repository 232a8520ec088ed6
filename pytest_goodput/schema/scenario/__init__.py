"""What to run: the scenario spec, the marker's arguments and the rules across them (pure)."""
