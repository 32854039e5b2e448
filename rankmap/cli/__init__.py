"""The ``rankmap`` console script: one subcommand per ``*_cmd`` module here.

Each command module defines ``NAME``, ``HELP``, ``ORDER`` (its place in
``--help``), ``add_arguments(parser)`` and ``run(args) -> int``; modules are
discovered, so adding a command touches no shared file.  Errors a user can fix (bad files, bad options) print
one line and exit 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rankmap", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"rankmap {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def command_modules() -> list:
    mods = [importlib.import_module(f"{__name__}.{info.name}")
            for info in pkgutil.iter_modules(__path__) if info.name.endswith("_cmd")]
    return sorted(mods, key=lambda m: (m.ORDER, m.NAME))


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
        print(f"rankmap {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rankmap: interrupted", file=sys.stderr)
        return 130
