"""The per-PR Markdown report: its sections, tables and Mermaid charts (pure)."""
