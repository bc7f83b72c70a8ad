"""The launch arguments. Mirrors sglang 0.5.9 server_args.py, reduced to what the mini tree reads.

`ServerArgs.add_cli_args` declares the flags with the same spellings, aliases and types as
0.5.9's (`--tensor-parallel-size` / `--tp-size`, `--speculative-draft-model-path` /
`--speculative-draft-model`, ...), and `prepare_server_args(argv)` parses a launch command line
the way `python -m sglang.launch_server` does.
"""

from __future__ import annotations

import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    trust_remote_code: bool = False
    dtype: str = "auto"
    context_length: int | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    enable_metrics: bool = False
    mem_fraction_static: float | None = None
    tp_size: int = 1
    log_level: str = "info"
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: int = 8

    # Speculative decoding
    speculative_algorithm: str | None = None  # EAGLE, EAGLE3, STANDALONE, NGRAM
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int = 3
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 4
    speculative_token_map: str | None = None

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        # Model and tokenizer
        parser.add_argument(
            "--model-path",
            "--model",
            type=str,
            help="The path of the model weights. This can be a local folder or a Hugging Face repo ID.",
            required=True,
        )
        parser.add_argument(
            "--trust-remote-code",
            action="store_true",
            help="Whether or not to allow for custom models defined on the Hub in their own modeling files.",
        )
        parser.add_argument(
            "--dtype",
            type=str,
            default=ServerArgs.dtype,
            choices=["auto", "half", "float16", "bfloat16", "float", "float32"],
            help="Data type for model weights and activations.",
        )
        parser.add_argument(
            "--context-length",
            type=int,
            default=ServerArgs.context_length,
            help="The model's maximum context length. Defaults to None (will use the value from the model's config.json instead).",
        )
        # HTTP server
        parser.add_argument(
            "--host",
            type=str,
            default=ServerArgs.host,
            help="The host of the HTTP server.",
        )
        parser.add_argument(
            "--port",
            type=int,
            default=ServerArgs.port,
            help="The port of the HTTP server.",
        )
        parser.add_argument(
            "--enable-metrics",
            action="store_true",
            help="Enable log prometheus metrics.",
        )
        # Memory and scheduling
        parser.add_argument(
            "--mem-fraction-static",
            type=float,
            default=ServerArgs.mem_fraction_static,
            help="The fraction of the memory used for static allocation (model weights and KV cache memory pool).",
        )
        # Parallelism
        parser.add_argument(
            "--tensor-parallel-size",
            "--tp-size",
            type=int,
            default=ServerArgs.tp_size,
            help="The tensor parallelism size.",
        )
        # Logging
        parser.add_argument(
            "--log-level",
            type=str,
            default=ServerArgs.log_level,
            help="The logging level of all loggers.",
        )
        # Optimization/debug options
        parser.add_argument(
            "--disable-cuda-graph",
            action="store_true",
            help="Disable cuda graph.",
        )
        parser.add_argument(
            "--cuda-graph-max-bs",
            type=int,
            default=ServerArgs.cuda_graph_max_bs,
            help="Set the maximum batch size for cuda graph.",
        )
        # Speculative decoding
        parser.add_argument(
            "--speculative-algorithm",
            type=str,
            choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"],
            help="Speculative algorithm.",
        )
        parser.add_argument(
            "--speculative-draft-model-path",
            "--speculative-draft-model",
            type=str,
            help="The path of the draft model weights. This can be a local folder or a Hugging Face repo ID.",
        )
        parser.add_argument(
            "--speculative-num-steps",
            type=int,
            help="The number of steps sampled from draft model in Speculative Decoding.",
            default=ServerArgs.speculative_num_steps,
        )
        parser.add_argument(
            "--speculative-eagle-topk",
            type=int,
            help="The number of tokens sampled from the draft model in eagle2 each step.",
            default=ServerArgs.speculative_eagle_topk,
        )
        parser.add_argument(
            "--speculative-num-draft-tokens",
            type=int,
            help="The number of tokens sampled from the draft model in Speculative Decoding.",
            default=ServerArgs.speculative_num_draft_tokens,
        )
        parser.add_argument(
            "--speculative-token-map",
            type=str,
            help="The path of the draft model's small vocab table.",
            default=ServerArgs.speculative_token_map,
        )

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> ServerArgs:
        args.tp_size = args.tensor_parallel_size
        if args.speculative_algorithm == "NEXTN":
            args.speculative_algorithm = "EAGLE"
        attrs = [attr.name for attr in dataclasses.fields(cls)]
        return cls(**{attr: getattr(args, attr) for attr in attrs})


def prepare_server_args(argv: list[str]) -> ServerArgs:
    """Parse a launch command line (`sys.argv[1:]` of `python -m sglang.launch_server`)."""
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    raw_args = parser.parse_args(argv)
    return ServerArgs.from_cli_args(raw_args)
