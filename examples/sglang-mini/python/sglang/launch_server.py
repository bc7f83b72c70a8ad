"""Launch the inference server. Mirrors sglang 0.5.9 launch_server.py: parse the arguments,
then start the HTTP server, which starts the scheduler (the mini tree is read, never run)."""

import sys

from sglang.srt.entrypoints.http_server import launch_server
from sglang.srt.server_args import prepare_server_args

if __name__ == "__main__":
    server_args = prepare_server_args(sys.argv[1:])
    launch_server(server_args)
