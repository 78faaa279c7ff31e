#!/usr/bin/python3
"""A minimal client of `qmpi serve` over ZeroMQ (pyzmq; Debian: python3-zmq).

    python3 zmq_client.py --connect tcp://127.0.0.1:5555 --prompt "Once upon a time"

Streams the text as it is generated, then prints the finish reason and the token counts.
See docs/protocol.md for every message.
"""

import argparse
import json
import os
import sys
import uuid

import zmq


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connect", default="tcp://127.0.0.1:5555")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--chat", action="store_true", help="send the prompt as a user message")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait per message")
    args = ap.parse_args()

    sock = zmq.Context.instance().socket(zmq.DEALER)  # DEALER: many replies per request
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(args.connect)

    request = {"v": 1, "type": "generate", "id": uuid.uuid4().hex, "stream": True,
               "max_tokens": args.max_tokens, "temperature": args.temperature}
    if args.chat:
        request["messages"] = [{"role": "user", "content": args.prompt}]
    else:
        request["prompt"] = args.prompt
    if os.environ.get("QMPI_API_KEY"):  # a server started with an API key needs it
        request["api_key"] = os.environ["QMPI_API_KEY"]
    sock.send_json(request)

    while True:
        if not sock.poll(int(args.timeout * 1000)):
            print(f"\nno reply from {args.connect} in {args.timeout:.0f} s", file=sys.stderr)
            return 1
        msg = json.loads(sock.recv())
        if msg["type"] == "delta":
            print(msg["text"], end="", flush=True)
        elif msg["type"] == "final":
            u = msg["usage"]
            print(f"\nfinish_reason: {msg['finish_reason']}, prompt {u['prompt_tokens']} tokens, "
                  f"generated {u['completion_tokens']}")
            return 0
        elif msg["type"] == "error":
            print(f"\nerror {msg['code']} ({msg['name']}): {msg['message']}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
