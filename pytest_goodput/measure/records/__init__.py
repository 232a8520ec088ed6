"""From the wire to a per-request record: SSE, packets, retiming, tokens, images, reasoning (pure)."""
