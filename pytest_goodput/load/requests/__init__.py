"""Building requests before a run: prompts (synthetic, datasets, shared prefixes, images,
traces), arrival schedules and think times, the prompt fingerprint and reasoning controls."""
