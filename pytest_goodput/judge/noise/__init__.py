"""The noise a baseline holds: run-to-run spread, sittings, outliers and the power it leaves (pure)."""
