"""Reports as plain text: the terminal summary, a failing test's message, the CLI's tables (pure)."""
