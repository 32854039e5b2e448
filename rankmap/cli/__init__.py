"""The ``rankmap`` console script: one subcommand per ``*_cmd`` module here.

Each command module ``NAME_cmd`` defines ``NAME``, ``HELP``, ``ORDER`` (its
place in ``--help``), ``add_arguments(parser)`` and ``run(args) -> int``;
modules are discovered by file name, so adding a command touches no shared
file.  A command line imports only the module of the command it names (each
module imports what its path needs: ``rankmap map --method identity`` loads
no scipy, search kernel or partitioner); ``rankmap --help`` reads every
command's ``NAME``, ``HELP`` and ``ORDER`` from its source and imports none
(not even numpy).  Errors
a user can fix (bad files, bad options) print one line and exit 2;
``--debug`` shows the traceback instead.

``args.started`` is when the command started, on the ``time.monotonic``
clock: the process start when ``main`` is the program's entry (a time limit
then bounds the whole wait, interpreter start included), else the call.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import time

DESCRIPTION = """\
Put the MPI ranks that talk most on the cores that are closest.

Typical use:
  rankmap demo                                   bundled example, end to end
  rankmap map TRACE --hierarchy 4:16:8 --distances 1:10:100 -o order --as openmpi
  rankmap eval GRAPH --mapping perm.txt --hierarchy 4:16:8
"""


class UserError(Exception):
    """A problem the user can fix; printed as one line."""


class _Parser(argparse.ArgumentParser):
    """Bad options are one line naming the option (exit 2), not a usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _top_parser():
    """The parser of the top-level options, and its subparsers' holder."""
    parser = _Parser(prog="rankmap", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"rankmap {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def listing_parser() -> argparse.ArgumentParser:
    """The parser that lists every command without its arguments
    (``command_table``: no command module imported): ``rankmap --help``."""
    parser, sub = _top_parser()
    for name, help_text, _ in command_table():
        sub.add_parser(name, help=help_text)
    return parser


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` only."""
    parser, sub = _top_parser()
    for mod in command_modules(None if command is None else [command]):
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def command_table() -> list[tuple[str, str, int]]:
    """(NAME, HELP, ORDER) of every command in ``--help`` order, read from
    the modules' sources (they are constants), none imported."""
    import ast
    from pathlib import Path

    rows = []
    for name in command_names():
        tree = ast.parse(Path(__file__).with_name(f"{name}_cmd.py").read_text(encoding="utf-8"))
        consts = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                  and isinstance(node.value, ast.Constant) for target in node.targets if isinstance(target, ast.Name)}
        rows.append((consts["NAME"], consts["HELP"], consts["ORDER"]))
    return sorted(rows, key=lambda row: (row[2], row[0]))


def command_names() -> list[str]:
    """Every command, from the module names alone (nothing imported)."""
    return sorted(info.name[:-len("_cmd")] for info in pkgutil.iter_modules(__path__)
                  if info.name.endswith("_cmd"))


def command_modules(names: list[str] | None = None) -> list:
    """The modules of ``names`` (default: every command), in ``--help`` order."""
    mods = [importlib.import_module(f"{__name__}.{name}_cmd") for name in names or command_names()]
    return sorted(mods, key=lambda m: (m.ORDER, m.NAME))


def _named_command(argv: list[str]) -> str | None:
    """The command a command line names, if its parser alone can read it:
    the first word, after top-level ``--debug`` only (``--help``,
    ``--version`` and unknown words take the whole parser)."""
    for word in argv:
        if word != "--debug":
            return word if word in command_names() else None
    return None


#: where a command that takes a program puts the words after the first ``--``, verbatim (argparse
#: would drop every later ``--``, and the relaunch lines rankmap prints hold one of their own)
TAIL_DEST = "program"


def _verbatim_tail(command: str | None, argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``argv`` up to the first ``--`` and the words after it, for a command
    whose module says ``TAKES_PROGRAM``; else ``argv`` whole and None."""
    if command is None or "--" not in argv or not getattr(command_modules([command])[0], "TAKES_PROGRAM", False):
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


def console() -> None:
    """The ``rankmap`` program: ``main``, then out without tearing the
    interpreter down.  Freeing every object of the search (scipy's, the
    partitioners') at exit takes a noticeable time after an auto run, all
    of it past the time limit
    (``os._exit`` after flushing, as mypy does; every file a command writes
    is closed by then).  Under MPI the normal exit, so MPI_Finalize runs."""
    code = main()
    if "mpi4py.MPI" not in sys.modules:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # a closed pipe: let the interpreter report as usual
            raise SystemExit(code) from None
        os._exit(code)
    raise SystemExit(code)


def one_line(message: str) -> str:
    """An error message as the one line a user reads (a library's message
    may carry line breaks)."""
    return " ".join(message.split())


def main(argv=None) -> int:
    started = time.monotonic()
    if argv is None:  # the program's entry: the command started with the process
        from ..deadline import process_start

        start = process_start()
        started = started if start is None else start
        argv = sys.argv[1:]
    command = _named_command(argv)
    parser = build_parser(command) if command else listing_parser()
    argv, tail = _verbatim_tail(command, argv)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None) and args.command:  # a command the first word did not name
        parser = build_parser(args.command)
        args = parser.parse_args(argv)
    if tail is not None:
        setattr(args, TAIL_DEST, getattr(args, TAIL_DEST, []) + tail)
    args.started = started
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:  # output piped into head & co.: not an error
        sys.stderr = open(os.devnull, "w")
        return 0
    except (UserError, ValueError, OSError, KeyError) as exc:
        if args.debug:
            raise
        msg = str(exc) if not isinstance(exc, KeyError) else f"missing {exc}"
        print(f"rankmap {args.command}: error: {one_line(msg)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rankmap: interrupted", file=sys.stderr)
        return 130
