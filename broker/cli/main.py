"""``group-broker``: the command line.

``serve`` runs the broker; every other command is a client of a running broker's HTTP control API
(``commands.py``, ``watch.py`` beside this module). The parser is built lazily where it pays: ``serve``'s flags (which
pull in asyncio) and the ``chaos run`` runner's flags are only added when that command is the one being run, so
the client commands start fast and a missing or broken runner never breaks them.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import signal
import sys
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, NoReturn

from broker.coordinator.group_type import GroupType

if TYPE_CHECKING:
    from broker.config import settings

# The commands that talk to the control API: they (and only they) take --admin and --json.
CONTROL_COMMANDS = ("groups", "describe", "transactions", "watch", "chaos", "cluster")
# kafka-consumer-groups.sh's offset and delete actions, over the Kafka protocol (offsets_commands.py).
OFFSET_COMMANDS = ("reset-offsets", "delete-offsets", "delete-group")
_OFFSET_HELP = (
    "reset a group's committed offsets, as kafka-consumer-groups.sh --reset-offsets (a dry run unless --execute)",
    "delete a group's committed offsets of some topics or partitions (OffsetDelete)",
    "delete groups that have no members, with their offsets (DeleteGroups)",
)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if argv is None and arguments[:1] == ["serve"]:  # this process is the broker; in-process callers keep theirs
        # No cyclic garbage collection while the modules load (each import allocates thousands of objects, and the
        # collector would walk them all again and again): turned back on once the broker is up (_serve).
        gc.disable()
        _import_kio_without_hypothesis()
    parser = build_parser(arguments)
    args, unknown = parser.parse_known_args(arguments)
    if unknown and getattr(args, "_handler", None) != "run_unavailable":  # that one says why it cannot run instead
        from broker.cli import suggest

        parser.error(suggest.unrecognized(parser, arguments, unknown))  # "did you mean --port?" (issue 26)
    if args.command == "serve":
        from broker.config import settings

        try:
            config = settings.resolve(args)
        except settings.SettingsError as error:
            parser.exit(2, f"group-broker serve: error: {error}\n")
        return serve_forever(config)
    if args.command == "health":
        from broker.cli import health

        return health.check(args)
    if args.command in OFFSET_COMMANDS:  # over the Kafka protocol, not the control API
        from broker.cli import offsets_commands

        return offsets_commands.run(args)
    if args.command in ("analyze", "generate-events"):
        status = args._run(args)  # analyze returns its exit status; generate-events what it wrote
        return status if isinstance(status, int) else 0
    from broker.cli import commands, discover

    try:
        discover.settle_admin(args)  # --bootstrap: the control API's URL, asked of the broker (issue 18)
    except discover.DiscoveryError as error:
        print(f"group-broker: {error}", file=sys.stderr)
        return 2 if error.usage else 1
    return commands.execute(args)


class _Parser(argparse.ArgumentParser):
    """A bad value is one line naming the option and the value, under a one-line usage (not serve's 50 lines of
    flags: --help has them); exit 2 as argparse does. Sub-commands inherit the class (add_subparsers)."""

    def error(self, message: str) -> NoReturn:
        if "invalid choice" in message:  # a near miss of a command or a choice: "did you mean" (issue 26)
            from broker.cli import suggest

            message = suggest.with_hint(message)
        self.exit(2, f"usage: {self.prog} [-h] ... (see {self.prog} --help)\n{self.prog}: error: {message}\n")


def build_parser(arguments: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The whole command line; ``arguments`` says which lazily built sub-commands need their real flags."""
    from broker import __version__

    description = "A Kafka consumer-group broker for tests."
    parser: argparse.ArgumentParser = _Parser(prog="group-broker", description=description)
    parser.add_argument("--version", action="version", version=f"group-broker {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="run the broker")
    if arguments[:1] == ["serve"]:
        from broker.config import settings

        settings.add_arguments(serve)
        return parser  # the broker's start-up path (issue 17): the other commands' flags are never read here
    health = commands.add_parser(
        "health",
        help="exit 0 if the broker answers: an ApiVersions round trip, and /readyz when the control API is on",
        description="Ask a running broker whether it is up (a container HEALTHCHECK). Without flags it finds the "
        "broker from the same GROUP_BROKER_* variables and TOML file `serve` reads.",
    )
    if arguments[:1] == ["health"]:
        from broker.cli import health as health_check

        health_check.add_arguments(health)

    _add_offset_commands(commands, arguments)
    _add_lazily(
        commands, arguments, "analyze", "broker.analytics.cli",
        "analyse event logs on Spark: rebalances, members, ownership, summary, disturbances, report "
        "(docs/analytics.md)",
    )
    _add_lazily(
        commands, arguments, "generate-events", "broker.analytics.generate",
        "write a realistic synthetic event log of any size (for the analytics job and its benchmark)",
    )

    common = argparse.ArgumentParser(add_help=False)
    if arguments[:1] and arguments[0] in CONTROL_COMMANDS:
        _add_control_flags(common)

    def command(group: argparse._SubParsersAction[argparse.ArgumentParser], name: str, handler: str, help_text: str,
                **options: object) -> argparse.ArgumentParser:
        sub = group.add_parser(name, help=help_text, description=help_text, parents=[common], **options)  # type: ignore[arg-type]
        sub.set_defaults(_handler=handler)
        return sub

    groups = command(
        commands, "groups", "groups", "list the broker's groups (classic, KIP-848 consumer and KIP-932 share groups)"
    )
    groups.add_argument("--type", choices=[t.value for t in GroupType], help="only groups of this kind")
    describe = command(
        commands, "describe", "describe",
        "one group: its members, assignments and latest events; a share group's share-partitions (SPSO, SPEO, "
        "in-flight records by state)",
    )
    describe.add_argument("group", metavar="GROUP")
    describe.add_argument(
        "--offsets", action="store_true",
        help="only the offsets table (kafka-consumer-groups.sh --describe's columns: CURRENT-OFFSET, LAG, ...; a "
        "share group's: its share-partitions)",
    )
    describe.add_argument(
        "--records", action="store_true",
        help="a share group's in-flight records too: per run of offsets its state, delivery count, the member "
        "holding it and the lock's time left",
    )
    transactions = command(
        commands, "transactions", "transactions",
        "list the open transactions (Ongoing, PrepareCommit, PrepareAbort) of the transaction coordinator",
    )
    transactions.add_argument(
        "--all", action="store_true", help="every transactional id the broker holds, idle ones too"
    )
    cluster = command(
        commands, "cluster", "cluster",
        "the nodes of a multi-node broker (serve --nodes N): who is up, the controller, who leads the internal "
        "partitions; with a verb, stop or start a node, move a coordinator or a partition leader",
    )
    if arguments[:1] == ["cluster"]:  # its verbs' flags only when it runs (broker/cli/cluster.py)
        from broker.cli import cluster as cluster_cli

        cluster_cli.add_arguments(cluster, command)
    watch = command(
        commands, "watch", "watch",
        "a live view of the groups (or of one), refreshed 4 times a second; "
        "with --json, follow the events as JSON lines",
    )
    watch.add_argument("group", metavar="GROUP", nargs="?", help="only this group")
    watch.add_argument("--once", action="store_true", help="render one frame (one JSON snapshot with --json) and exit")

    chaos = commands.add_parser("chaos", help="disturb groups on purpose: kick, fence, rebalance, fault rules")
    verbs = chaos.add_subparsers(dest="verb", required=True, metavar="VERB")
    kick = command(
        verbs, "kick", "kick",
        "remove a member at once, as if its session expired (a consumer group's: as if it left); the group rebalances",
    )
    kick.add_argument("group", metavar="GROUP")
    kick.add_argument("member_id", metavar="MEMBER_ID")
    fence = command(
        verbs, "fence", "fence",
        "fence a static member, as if another process took its instance id (a consumer group's is removed)",
    )
    fence.add_argument("group", metavar="GROUP")
    fence.add_argument("instance_id", metavar="INSTANCE_ID")
    rebalance = command(
        verbs, "rebalance", "rebalance",
        "start a rebalance of a group (a consumer group's epoch is bumped: a new target at the next heartbeat)",
    )
    rebalance.add_argument("group", metavar="GROUP")

    fault = verbs.add_parser("fault", help="fault rules: errors, delays, closed connections, swallowed heartbeats")
    fault_verbs = fault.add_subparsers(dest="fault_verb", required=True, metavar="VERB")
    add = command(fault_verbs, "add", "fault_add", "add a fault rule (its match fields are AND-ed)")
    match = add.add_argument_group("match (all optional)")
    match.add_argument(
        "--api", help="Kafka API name: JoinGroup, SyncGroup, Heartbeat, ConsumerGroupHeartbeat, OffsetCommit, ...",
    )
    match.add_argument("--group", dest="group_id", metavar="GROUP")
    match.add_argument("--member", dest="member_id", metavar="MEMBER_ID")
    match.add_argument("--instance", dest="group_instance_id", metavar="INSTANCE_ID")
    match.add_argument("--client-id", metavar="CLIENT_ID")
    match.add_argument("--transactional-id", metavar="TRANSACTIONAL_ID")
    actions = add.add_argument_group("action (exactly one)").add_mutually_exclusive_group(required=True)
    actions.add_argument("--error", metavar="NAME_OR_CODE", help="answer with this Kafka error (name or code)")
    actions.add_argument("--delay-ms", type=int, metavar="N", help="delay the answer by N ms")
    actions.add_argument("--close", action="store_true", help="close the connection instead of answering")
    actions.add_argument(
        "--swallow-heartbeats", action="store_true",
        help="answer the matched Heartbeats with NONE but leave the session unrefreshed: evicted on its timeout",
    )
    limits = add.add_argument_group("limits")
    limits.add_argument("--count", type=int, metavar="N", help="fire at most N times")
    limits.add_argument("--probability", type=float, metavar="P", help="fire with probability P in (0, 1]")
    limits.add_argument("--seed", type=int, metavar="S", help="random seed for --probability")
    limits.add_argument("--duration-ms", type=int, metavar="D", help="the rule lapses after D ms")
    command(fault_verbs, "list", "fault_list", "list the fault rules")
    delete = command(fault_verbs, "delete", "fault_delete", "delete one fault rule")
    delete.add_argument("rule_id", metavar="ID")
    command(fault_verbs, "clear", "fault_clear", "delete every fault rule")

    wait = command(verbs, "wait", "wait", "wait until a group is in a given shape (exit 1 on timeout)")
    wait.add_argument("group", metavar="GROUP")
    wait.add_argument(
        "--state", metavar="STATE",
        help="classic groups: Empty, PreparingRebalance, CompletingRebalance, Stable; consumer groups: Empty, "
        "Assigning, Reconciling, Stable; share groups: Empty, Stable",
    )
    wait.add_argument("--members", type=int, metavar="N", help="exactly N members")
    wait.add_argument(
        "--min-generation", type=int, metavar="G",
        help="generation (a consumer or share group's group epoch) G or later",
    )
    wait.add_argument("--timeout-ms", type=int, default=30000, metavar="T", help="give up after T ms (default 30000)")

    _add_chaos_run(verbs, common, load=list(arguments[:2]) == ["chaos", "run"])
    return parser


def _add_control_flags(common: argparse.ArgumentParser) -> None:
    """``--admin``, ``--bootstrap`` and ``--json``, added only when a control API command runs: their defaults
    come from the control API's client module, whose imports (urllib.request, http.client) ``--help`` and ``serve``
    can do without. Left None when not given: ``discover.settle_admin`` picks the URL."""
    from broker.cli.discover import BOOTSTRAP_ENV
    from broker.control import grace
    from broker.control.client import DEFAULT_URL, URL_ENV

    common.add_argument(
        "--admin",
        metavar="URL",
        default=None,
        help=f"the broker's control API; wins over --bootstrap [env {URL_ENV}; default {DEFAULT_URL}]",
    )
    common.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        default=None,
        help="find the control API from the broker's Kafka address (it advertises the URL in DescribeConfigs), "
        f"e.g. when its default admin port was taken [env {BOOTSTRAP_ENV}]",
    )
    common.add_argument("--json", action="store_true", help="print the API's JSON instead of a table")
    grace.add_argument(common)  # --wait-for-broker S: a broker that is starting is waited for (issue 26)


def _add_offset_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], arguments: Sequence[str]
) -> None:
    """reset-offsets, delete-offsets, delete-group: their flags (and module) only when one of them runs."""
    for name, help_text in zip(OFFSET_COMMANDS, _OFFSET_HELP, strict=True):
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if arguments[:1] == [name]:
            from broker.cli import offsets_commands

            offsets_commands.add_arguments(name, sub)


def _add_lazily(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], arguments: Sequence[str], name: str, module: str,
    help_text: str,
) -> None:
    """A command whose module (and its flags) is imported only when it is the one being run."""
    sub = commands.add_parser(name, help=help_text, description=help_text)
    if arguments[:1] == [name]:
        handler = importlib.import_module(module)
        handler.add_arguments(sub)
        sub.set_defaults(_run=handler.run)


def _add_chaos_run(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser, load: bool
) -> None:
    """``chaos run`` lives in broker/chaos/runner.py, imported only to run it: if it is missing or broken, only
    ``chaos run`` says so."""
    help_text = "run a chaos scenario (broker/chaos/runner.py)"
    # "resolve": the runner may define --admin/--json itself; its definitions win.
    run = verbs.add_parser("run", help=help_text, parents=[common], conflict_handler="resolve", add_help=not load)
    if not load:
        return
    try:
        runner = importlib.import_module("broker.chaos.runner")
        run.add_argument("-h", "--help", action="help", help="show this help message and exit")
        runner.add_arguments(run)
    except Exception as error:  # a broken runner: report it when run, keep every other command working
        reason = f"{type(error).__name__}: {error}" if not isinstance(error, ImportError) else str(error)
        run.description = f"{help_text} -- unavailable: {reason}"
        run.add_argument("-h", "--help", action="help", help="show this help message and exit")
        run.set_defaults(_handler="run_unavailable", _unavailable=reason)
        return
    run.set_defaults(_handler="run", _runner=runner.run)


def _import_kio_without_hypothesis() -> None:
    """Load kio as if hypothesis were not installed.

    kio registers hypothesis strategies for its types whenever hypothesis is importable (``kio.static._phantom``),
    so in an environment with the test extras the broker imported all of hypothesis at start: about 120 ms of
    start-up and several MB of idle memory for code the server never runs. Hidden only while kio loads; hypothesis
    stays importable afterwards.
    """
    _import_without("hypothesis", "kio.static._phantom")


def _import_without(hidden: str, module: str) -> None:
    """Import ``module`` as if the package ``hidden`` were not installed; ``hidden`` stays importable afterwards.

    Also for structlog, which imports rich (~70 ms, several MB: issue 17) for console tracebacks whenever it is
    installed; broker/config/logs.py renders those with rich itself, imported at the first traceback.
    """
    if hidden in sys.modules or module in sys.modules:
        return
    sys.modules[hidden] = None  # type: ignore[assignment]  # makes `import hidden...` raise ImportError
    try:
        importlib.import_module(module)
    finally:
        del sys.modules[hidden]


def serve_forever(config: settings.Settings) -> int:
    import asyncio

    from broker import log

    # structlog loads (with rich hidden) and is configured by the broker's loading thread once the Kafka listener
    # answers, or by the first line logged before that (broker/log.py): nothing is logged on the way to it.
    log.set_up_with(partial(_set_up_logs, config.log_level, config.log_format))
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; this keeps odd platforms working
        return asyncio.run(_serve(config))
    return uvloop.run(_serve(config))


def _set_up_logs(level: str, fmt: str) -> None:
    _import_without("rich", "structlog")
    from broker.config import logs

    logs.configure(level, fmt)


async def _serve(config: settings.Settings) -> int:
    import asyncio

    from broker.server.broker import BrokerServer

    try:
        server = BrokerServer(config, load_in_background=True)  # the first ApiVersions answer comes first
    except OSError as error:  # the data directory refused (broker/server/durable.py): its one line
        print(f"group-broker: {error}", file=sys.stderr)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await server.start()
    except OSError as error:
        whole = getattr(error, "whole_line", False) or "control API" in str(error)
        where = "" if whole else f"cannot listen on {config.host}:{config.port}: "
        print(f"group-broker: {where}{error}", file=sys.stderr)
        return 1
    finally:
        # What start-up loaded (modules, the state) lives as long as the process: frozen, later collections skip it.
        gc.freeze()
        _collect_old_objects_rarely()
        gc.enable()
        _trim_heap()
    await stop.wait()
    await server.stop()
    return 0


# Full collections only after this many collections of the middle generation (CPython's default: 10).
OLD_GENERATION_THRESHOLD = 100


def _collect_old_objects_rarely() -> None:
    """Members, their deadlines and their groups live long and hold no reference cycles (a group formed, left and
    deleted leaves no cyclic garbage), yet every full collection walks them all: forming 30,000 members spent 0.9 s
    of 7.6 s of CPU in 12 full collections, 0.07 s with this threshold (issue 17). Young objects are collected as
    often as before; cyclic garbage that reaches the old generation waits longer."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, OLD_GENERATION_THRESHOLD)


def _trim_heap() -> None:
    """Hand back to the system the heap pages start-up freed, the import threads' arenas above all (glibc's
    malloc_trim: about 1 MB of idle RSS, issue 17). Elsewhere nothing to do."""
    import contextlib
    import ctypes

    # No glibc (musl, macOS): its allocator trims in its own way.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)  # the process's own symbols: libc's, without a library search


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
