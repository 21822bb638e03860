"""``group-broker``: the command line."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from broker import logs, settings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="group-broker", description="A Kafka consumer-group broker for tests.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the broker")
    settings.add_arguments(serve)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve_forever(settings.from_arguments(args))
    return 2


def serve_forever(config: settings.Settings) -> int:
    logs.configure(config.log_level, config.log_format)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; this keeps odd platforms working
        return asyncio.run(_serve(config))
    return uvloop.run(_serve(config))


async def _serve(config: settings.Settings) -> int:
    from broker.server import BrokerServer

    server = BrokerServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await server.start()
    except OSError as error:
        print(f"group-broker: cannot listen on {config.host}:{config.port}: {error}", file=sys.stderr)
        return 1
    await stop.wait()
    await server.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
