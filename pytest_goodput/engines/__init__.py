"""Engines (I/O): attach to, launch or simulate an engine, and read its Prometheus metrics.

- ``engines.engine``: ``select()``, ``attach()``, ``launch()``, ``simulator()`` → ``Engine``.
- ``engines.launch``: ``launch()`` → ``LaunchedEngine``; ``EngineStartError``.
- ``engines.prometheus``: ``scrape()``, ``delta()``, ``server_metrics()``.
- ``engines.histograms``: ``run_histograms()``, the engine's latency histograms over a run.
- ``engines.llamacpp_server`` and ``engines.tinyllama``: llama.cpp's server from the
  ``xllamacpp`` wheel and a tiny random GGUF model, so CI can run a real engine on a CPU.

Nothing is imported here: import the submodule you need.
"""
