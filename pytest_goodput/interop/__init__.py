"""Other tools' result files, read into our schema and written from it (pure).

Teams already run `vllm bench serve`, AIPerf and GuideLLM and read dashboards fed by llm-d's
Benchmark Report, Bencher and PyTorch's benchmark database: this layer translates between
their formats and ours (text and dicts in, models out, and back), so the one judge gates their
results and their tools read ours. Reading and writing the files is the callers' (CLI, plugin).
"""
