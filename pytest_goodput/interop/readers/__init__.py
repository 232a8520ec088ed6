"""Other tools' result files read into our run results (pure: parsed documents in, models out).

One module per tool (``vllm_bench``, ``aiperf``, ``guidellm``), ``formats`` to tell them apart
by content, ``imported`` for what they share and ``side`` to hand them to the one judge.
"""
