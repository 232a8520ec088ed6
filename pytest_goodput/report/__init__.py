"""Reports users read: terminal summary, Markdown PR report, GitHub annotations, JUnit, plots."""
