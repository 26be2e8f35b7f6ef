"""The `fragflow` command.

    fragflow info              the GL backend, driver, limits and cache directories
    fragflow dump GRAPH.json   a saved graph's text dump (--format text|json|dot)
"""
from __future__ import annotations

import argparse
import sys

import fragflow as ff


def cmd_info(args) -> int:
    from fragflow.runtime import get_context
    try:
        ctx = get_context()
    except ff.BackendError as err:
        print(f"no OpenGL backend works here:\n{err}", file=sys.stderr)
        return 1
    info = ctx.info()
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"{key.ljust(width)}  {value}")
    for attempt in ctx.failed_attempts:
        print(f"{'tried first'.ljust(width)}  {attempt}")
    return 0


def cmd_dump(args) -> int:
    graph = ff.load_graph(args.target)
    print(ff.dump(graph, format=args.format))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fragflow", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="GL backend, vendor, renderer, version and limits")
    dump = sub.add_parser("dump", help="print a saved graph (ff.save_graph)")
    dump.add_argument("target", help="a graph saved with ff.save_graph (JSON)")
    dump.add_argument("--format", default="text", choices=["text", "json", "dot"])
    args = parser.parse_args(argv)
    try:
        return {"info": cmd_info, "dump": cmd_dump}[args.command](args)
    except ff.FragflowError as err:
        print(f"fragflow: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
