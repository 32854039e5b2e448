"""Compute a task -> PE mapping and write it as a launch file.

Reads the communication graph (or a recorded trace), maps it onto the machine
with the chosen method, prints J before (where a trace says the ranks ran,
else the launch order: rank r on PE r) and after, and writes the mapping in
the format the next launch needs, then the command that relaunches with it.
A trace that recorded its hosts' topologies needs no machine options; with
--hosts/--hostfile (or inside a Slurm allocation) the mapping is for those
hosts.

examples:
  rankmap map app.mat --hierarchy 4:16:8 --distances 1:10:100
  rankmap map trace.rmtrace.npz -o rankfile --as openmpi
  rankmap map trace.rmtrace.npz --hosts 'cn[01-16]' --as all -o launch/
  rankmap map app.mat --hostfile hosts.txt --topology node.xml --switches topology.conf
  rankmap map graph.metis --topology arch.tgt --method greedy --json
  rankmap map app.mat --torus 16x32x32 --cores 4 --method mesh_auto
  rankmap map app.mat --mesh 8x8 --objective bottleneck
  rankmap map trace.rmtrace.npz --objective sum        # J alone
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ..algorithms import METHODS, OBJECTIVES, apply_objective, map_tasks, objective_of, pass_seconds
from ..algorithms.options import check_options
from ..cost import evaluate, mapping_cost, phased_link_time
from ..deadline import Deadline, slowness
from ..formats import LAUNCH_FORMATS, write_launch_files
from ..formats.hydra import mend_for_hydra
from ..formats.relaunch import relaunch_lines
from . import UserError, values
from .common import (add_graph_arguments, add_topology_arguments, check_fits, dump_json,
                     launch_notes, load_graph, load_machine, phase_graphs, print_comparison,
                     print_relaunch, recorded_program, recorded_replay)

#: the report's second half (the mapping's J, bytes per level and link loads) is reserved
#: at this many times the first half's measured wall time (the given order's, made before
#: the mapping, which also pays the one-off costs: 3.1 s against 1.9 s at 2^20 tasks, load
#: 6.5 on 2 cores).  A price at idle-core speed left a 10 s limit there running 14-23 s
REPORT_MARGIN = 1.0
#: ... plus, with ``-o``, the launch files: seconds per rank, as slow as the first half ran (a launch
#: file and its bindings file for 2^20 ranks: 2.9 s for hydra and Slurm, 3.8 s for an Open MPI rankfile
#: on an idle core of the development machine)
LAUNCH_SECONDS_PER_RANK = 4e-6
#: where the trace has the ranks' message order, a mapping for the link time replaces the order the
#: ranks ran in only when the replay of that order on it is this much faster: the link time cannot rank
#: pipelined programs (a sweep's layouts of equal link time ran 13 % apart) ...
REPLAY_GAIN = 0.01
#: ... or when the two replay within REPLAY_GAIN of each other (a tie) and the mapping's J is this much
#: lower: the replay shares each link fairly among its flows, and more bytes on a link cost more than
#: that (the sweep's 2 x 2 blocks, J 0.67 x, ran 4-8 % faster than the columns the replay tied them with)
TIE_J_GAIN = 0.05
#: a mapping whose J and time are both within this of the given order's keeps the given order:
#: within what repeated runs of one order differ by, moving every process buys nothing measurable
NOISE = 0.005

NAME = "map"
HELP = "compute a better rank order from a communication graph or trace"
ORDER = 20


def add_arguments(p) -> None:
    add_graph_arguments(p)
    add_topology_arguments(p)
    p.add_argument("--method", default="auto", metavar="METHOD",
                   help="mapping method (default: auto, the best J of the strongest methods); "
                        "--methods lists them")
    p.add_argument("--methods", action=ListMethods, help="list the mapping methods and exit")
    p.add_argument("--seed", type=values.seed, default=0, help="random seed (results are deterministic per seed)")
    p.add_argument("--eps", type=values.eps, default=None,
                   help="allowed imbalance with many tasks per PE, e.g. 0.03; a job with more "
                        "tasks than the machine has slots needs it (else it is an error)")
    p.add_argument("--objective", default=None, choices=OBJECTIVES,
                   help="time (auto's default): J, then the link time (the busiest link's bytes over "
                        "its bandwidth) lowered with J kept within 1%%; sum: J alone, the bytes x "
                        "distance total (a named --method's default); bottleneck: the link time "
                        "whatever J (Langguth, Schlag & Schulz)")
    p.add_argument("--comm-factor", type=values.number(0.0), default=None, metavar="F",
                   help="report the makespan max(max PE load, F x most loaded link), vertex "
                        "weights as computation")
    p.add_argument("--time-limit", type=values.seconds, default=None, metavar="SECONDS",
                   help="wall-clock limit on the mapping: the methods that search (auto, "
                        "refinement) plan their work for it and stop at it with the best mapping "
                        "so far (--json says \"deadline_hit\" when it cut the search; auto's "
                        "default: about twice VieM's work, at most 10)")
    p.add_argument("--work-limit", type=values.seconds, default=None, metavar="SECONDS",
                   help="the same budget counted in work, never read from the clock: the result "
                        "is the same on any machine (reproducible experiments); with "
                        "--time-limit, that still bounds the wall time")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="method-specific option, repeatable (e.g. --option backend=kahip)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the mapping to FILE (with --as all: a directory) and print the "
                        "command that relaunches the program with it")
    p.add_argument("--as", dest="as_format", default="perm", choices=[*LAUNCH_FORMATS, "all"],
                   help="launch file format: perm (line t = PE of task t), mpich (Cray "
                        "MPICH_RANK_ORDER), hydra (mpiexec -f machinefile), openmpi (rankfile), "
                        "slurm (SLURM_HOSTFILE for --distribution=arbitrary), bind (the CPUs and "
                        "GPU of each rank, for rankmap-bind), all (every one into the directory -o "
                        "names). A launcher's file comes with the bindings beside it "
                        "(FILE.bindings): the printed relaunch line starts each rank through "
                        "rankmap-bind, which binds it to the cores (and GPU) the mapping chose")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--distributed", action="store_true",
                   help="run under mpiexec -n P: the distributed multilevel mapping spread over "
                        "the P ranks (label propagation coarsening, the coarse graph mapped by auto "
                        "on rank 0, swap rounds), kept only where it beats the --method start "
                        "computed on rank 0 (rank 0 reports)")
    p.add_argument("--rounds-only", action="store_true",
                   help="with --distributed only: no coarsening, only the distributed swap rounds "
                        "from the --method start")
    p.add_argument("--replicas", type=values.count(1), default=None, metavar="N",
                   help="with --distributed only: independent copies of the problem every round "
                        "carries (default 8); each breaks ties its own way and the best copy wins. "
                        "More copies: the best of N local optima, at N times the local work and "
                        "message volume per round (the number of collectives stays the same, so "
                        "where latency dominates a round costs about the same); 1: one plain run")
    p.add_argument("--kicks", type=values.count(0), default=None, metavar="N",
                   help="with --distributed only: after the rounds converge, N times perturb "
                        "every copy (random swaps of a tenth of the tasks), run the rounds again "
                        "and keep the result where J fell (default 0). Never a higher J; each "
                        "kick costs about one more descent's rounds")


class ListMethods(argparse.Action):
    """``--methods``: print the registry and exit.  The method names are not
    argparse choices because listing them imports every method (scipy, KaHIP,
    Mt-KaHyPar), which each rank of ``mpiexec rankmap map --distributed``
    would pay for; an unknown name is reported when the mapping starts."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        for name in sorted(METHODS):
            spec = METHODS[name]
            print(f"{name:14s} [{'/'.join(spec.machines)}] {spec.description}")
        parser.exit()


def parse_options(pairs: list[str]) -> dict:
    """``KEY=VALUE`` strings to keyword arguments (numbers and booleans typed)."""
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"--option expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        out[key.strip().replace("-", "_")] = _typed(value.strip())
    try:
        return check_options(out)
    except ValueError as exc:
        raise UserError(f"--option: {exc}") from None


def _typed(value: str):
    low = value.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def _load(args):
    """Graph, machine, recorded placement and method options, with the notes
    a user should see."""
    graph = load_graph(args)
    topology, recorded = load_machine(args, graph_source=args.input)
    options = parse_options(args.option)
    for name in ("time_limit", "work_limit"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    check_fits(graph, topology, args.eps)
    if graph.self_bytes and not args.json:
        print(f"note: ignored {graph.self_bytes:.6g} bytes of self-traffic (diagonal)", file=sys.stderr)
    return graph, topology, recorded, options


def run(args) -> int:
    if args.distributed:
        return _run_distributed(args)
    given = [name for name, value in (("--replicas", args.replicas), ("--kicks", args.kicks),
                                      ("--rounds-only", args.rounds_only or None))
             if value is not None]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise UserError(f"{' and '.join(given)} only {verb} with --distributed (the distributed "
                        "mapping)")
    deadline = Deadline(args.time_limit, start=args.started)  # start-up and reading count too
    graph, topology, recorded, options = _load(args)
    # ... and the report: its half about the given order now, timed, the other half's time kept
    began = time.monotonic()
    before = _before(args, graph, topology, recorded, deadline)
    half = time.monotonic() - began
    priced = _BEFORE_PASSES * pass_seconds(graph)
    if priced >= PACE_MIN_SECONDS:  # long enough to time: the passes' pace
        deadline.pace = half / priced
    reserve = REPORT_MARGIN * half
    if args.output:
        reserve += LAUNCH_SECONDS_PER_RANK * graph.n * slowness(began, priced)
    mapping = map_tasks(graph, topology, method=args.method, seed=args.seed, eps=args.eps,
                        objective=args.objective, deadline=deadline.sooner(reserve), **options)
    _judge_by_replay(args, graph, topology, mapping, before, deadline)
    return _report(args, graph, topology, recorded, mapping, before)


def _judge_by_replay(args, graph, topology, mapping, before: dict, deadline) -> None:
    """Where the trace has the ranks' message order: the mapping's replay
    beside the given order's (``before["replayed"]``), and for the time
    objective the given order kept unless the mapping replays REPLAY_GAIN
    faster, or ties and lowers J by TIE_J_GAIN (``before["kept"]``: the
    ratio of the two replays)."""
    if before["replay"] is None or np.array_equal(mapping.pe_of_task, before["pe"]):
        return
    after = recorded_replay(args, topology, mapping.pe_of_task, deadline)
    if after is None:  # the deadline came first: the mapping as the search left it
        return
    ratio = after.seconds / before["replay"].seconds if before["replay"].seconds else 1.0
    keep = objective_of(args.method, args.objective) == "time" and ratio > 1 - REPLAY_GAIN
    if keep and ratio <= 1 + REPLAY_GAIN:  # a tie: a J lower by TIE_J_GAIN decides
        keep = mapping_cost(graph, topology, mapping.pe_of_task) >= (1 - TIE_J_GAIN) * before["report"].J
    if keep:
        before["kept"] = ratio
        mapping.pe_of_task = before["pe"].copy()
    else:
        before["replayed"] = (before["replay"], after)


def _no_better(before, after, replayed) -> dict | None:
    """Where the mapping changes neither J nor the time (the replay of the
    recorded message order, else the message time where the graph counts
    messages, else the link time) by more than ``NOISE``: the two ratios;
    else None."""
    j = after.J / before.J if before.J else 1.0
    if replayed is not None:
        what, t = "message order replayed", replayed[1].seconds / replayed[0].seconds if replayed[0].seconds else 1.0
    elif after.time is not None and before.time is not None:
        what, t = "message time", after.time.total / before.time.total if before.time.total else 1.0
    else:
        what, t = "link time", after.link_time / before.link_time if before.link_time else 1.0
    if abs(j - 1) > NOISE or abs(t - 1) > NOISE:
        return None
    return {"J": j, "time": what, "ratio": t}


def _hydra_whole(args, graph, topology, mapping, given_pe) -> tuple[int, float]:
    """Where a hydra machinefile is written and hydra would split hosts
    over several lines: the mapping after the few swaps that keep them
    whole, if J rises by ``hydra.MEND_J_SLACK`` at most (``mend_for_hydra``);
    (swaps, J's rise).  The given order kept stays as it is."""
    if not args.output or args.as_format not in ("hydra", "all") or \
            np.array_equal(mapping.pe_of_task, given_pe):
        return 0, 0.0
    pe, swaps, rise = mend_for_hydra(graph, topology, mapping.pe_of_task)
    mapping.pe_of_task = pe
    return swaps, rise


def _message_times(before, after) -> dict:
    """The report's message time per rank and its parts, after and before
    (None where the graph counts no messages), under ``CostReport.as_dict``'s keys."""
    keys = ("time", "time_latency", "time_bandwidth")
    now, then = after.as_dict(), before.as_dict()
    return {**{k: now[k] for k in keys}, **{f"{k}_before": then[k] for k in keys}, "time_source": now["time_source"]}


def _run_distributed(args) -> int:
    """Rank 0 reads the inputs and reports; every rank refines its block.
    Reading happens inside the collective agreement, so a bad file fails on
    every rank instead of leaving the others waiting."""
    from mpi4py import MPI

    from ..reorder.agree import ReorderFailed, root_step
    from ..reorder.offline import map_distributed

    comm = MPI.COMM_WORLD
    deadline = Deadline(args.time_limit, start=args.started)  # rank 0's decides
    try:
        inputs = root_step(comm, "reading the input", _load, args)
    except ReorderFailed as exc:
        raise UserError(str(exc)) from None
    graph, topology, recorded, options = inputs if inputs is not None else (None, None, None, {})
    rounds = {name: value for name, value in (("replicas", args.replicas), ("kicks", args.kicks))
              if value is not None}  # else map_distributed's defaults
    mapping = map_distributed(graph, topology, method=args.method, seed=args.seed, eps=args.eps,
                              comm=comm, multilevel=not args.rounds_only, deadline=deadline,
                              **rounds, **options)
    try:  # rank 0 reports; a failure there (an unwritable -o) is every rank's exit status
        return root_step(comm, "writing the result", _report, args, graph, topology, recorded,
                         mapping, None)
    except ReorderFailed as exc:
        raise UserError(str(exc)) from None


_BEFORE_PASSES = 3  # _before's work in J passes (``pass_seconds``): one evaluation
PACE_MIN_SECONDS = 0.3  # the report's half priced at least this long times the pace of the passes after a search


def _before(args, graph, topology, recorded, deadline=None) -> dict:
    """The half of the report that does not need the mapping: the given
    order (recorded placement, else identity) evaluated, with the phases'
    link times and the identity's J."""
    identity = map_tasks(graph, topology, method="identity", eps=args.eps)
    before_pe, before_name = identity.pe_of_task, "identity"
    if recorded is not None:
        before_pe, before_name = recorded, "recorded"
    before = evaluate(graph, topology, before_pe, check=False, comm_factor=args.comm_factor)
    phases = phase_graphs(args)
    j_identity = before.J if recorded is None else evaluate(graph, topology, identity.pe_of_task, check=False).J
    return {"pe": before_pe, "name": before_name, "report": before, "phases": phases, "J_identity": j_identity,
            "phased": phased_link_time(phases, topology, before_pe) if phases else None,
            "replay": recorded_replay(args, topology, before_pe, deadline), "replayed": None, "kept": None}


def _report(args, graph, topology, recorded, mapping, given: dict | None) -> int:
    """The result: ``given`` (``_before``, or None: made here) beside the
    mapping, the launch files, the relaunch line."""
    objective = objective_of(args.method, args.objective)
    if args.distributed:  # the distributed rounds lower J: the links on rank 0 afterwards
        mapping.pe_of_task = apply_objective(graph, topology, mapping.pe_of_task, objective, seed=args.seed,
                                             eps=args.eps)
    if given is None:  # the distributed mapping: judged here, on rank 0
        given = _before(args, graph, topology, recorded)
        _judge_by_replay(args, graph, topology, mapping, given, None)
    before_pe, before_name, before, j_identity = given["pe"], given["name"], given["report"], given["J_identity"]
    same = np.array_equal(mapping.pe_of_task, before_pe)  # e.g. no time was left to map
    after = before if same else evaluate(graph, topology, mapping.pe_of_task, check=False,
                                         comm_factor=args.comm_factor)
    no_better = None if same else _no_better(before, after, given["replayed"])
    if no_better is not None:  # moving every process for nothing the model can see: the given order stays
        mapping.pe_of_task, after, same, given["replayed"] = before_pe.copy(), before, True, None
    mended = _hydra_whole(args, graph, topology, mapping, before_pe)
    if mended[0]:
        after = evaluate(graph, topology, mapping.pe_of_task, check=False, comm_factor=args.comm_factor)
    phases = given["phases"]
    phased = (given["phased"], given["phased"] if same else phased_link_time(phases, topology, mapping.pe_of_task)) \
        if phases else None
    replayed = given["replayed"] or ((given["replay"], given["replay"]) if same and given["replay"] else None)
    written = write_launch_files(mapping.pe_of_task, topology, args.output, args.as_format) \
        if args.output else {}
    notes = launch_notes(written, mapping.pe_of_task, topology)
    if args.json:
        dump_json({"method": args.method, "seed": args.seed, "n_tasks": graph.n,
                   "n_pes": topology.n_pes, "J": after.J,
                   "J_identity": j_identity,
                   "before": before_name, "J_before": before.J,
                   "ratio": after.J / before.J if before.J else 1.0,
                   "bytes_per_level": after.bytes_per_level, "bottleneck": after.bottleneck,
                   "hops_per_byte": after.hops_per_byte, "time_s": mapping.time_s,
                   "time_limit": args.time_limit, "work_limit": args.work_limit,
                   "deadline_hit": mapping.deadline_hit,
                   "objective": objective, "bottleneck_link": after.bottleneck_link,
                   "link_time": after.link_time, "link_time_before": before.link_time,
                   "link_time_unit": after.link_time_unit, "busiest_link": after.busiest_link,
                   "busiest_link_bytes": after.busiest_link_bytes,
                   "busiest_link_bytes_before": before.busiest_link_bytes,
                   "phased_link_time": phased and phased[1], "phased_link_time_before": phased and phased[0],
                   **_message_times(before, after),
                   "replay_time": replayed and replayed[1].seconds,
                   "replay_time_before": replayed and replayed[0].seconds,
                   "kept_given_order": given["kept"] is not None or no_better is not None,
                   "no_better_than_given": no_better,
                   "replay_ratio_of_search": given["kept"],
                   "makespan": after.makespan,
                   "output": args.output, "output_format": args.as_format if args.output else None,
                   "launch_files": written,
                   "hydra_swaps": mended[0], "hydra_note": notes.get("hydra"),
                   "relaunch": relaunch_lines(written, graph.n, recorded_program(args.input)),
                   "pe_of_task": None if args.output else mapping.pe_of_task.tolist(),
                   **({"distributed": mapping.info} if args.distributed else {})})
        return 0
    print(f"{graph.n} tasks, {graph.n_edges} communicating pairs, {graph.total_bytes:.6g} bytes; "
          f"{topology.n_pes} PEs on {len(topology.hosts())} host(s)")
    print_comparison(before_name, args.method, before, after, phased, replayed)
    if given["kept"] is not None:
        print(f"kept the {before_name} order: on the search's mapping the recorded message order replays in "
              f"{given['kept']:.3f} x its time (a move needs {1 - REPLAY_GAIN:.2f} x or less, or a tie and J "
              f"{1 - TIE_J_GAIN:.2f} x or less)")
    if no_better is not None:
        print(f"kept the {before_name} order: the search's mapping is no better (J {no_better['J']:.4f} x, "
              f"{no_better['time']} {no_better['ratio']:.4f} x; a move needs one of them {100 * NOISE:g} % "
              "apart)" + ("; the launch files reproduce it" if args.output else ""))
    if after.makespan is not None:
        print(f"makespan (F = {args.comm_factor:g}): {before.makespan:.6g} -> {after.makespan:.6g}")
    print(f"mapping time: {mapping.time_s:.3f} s")
    if mapping.deadline_hit:
        print(f"the time limit ({args.time_limit:g} s) cut the search: the best mapping found by then "
              "(rerun with a larger --time-limit, or --work-limit, for a repeatable result)")
    if args.distributed:
        i = mapping.info
        if "level_sizes" in i:
            print(f"distributed multilevel on {i['ranks']} ranks: levels of "
                  f"{' -> '.join(map(str, i['level_sizes']))} vertices, {i['rounds']} rounds "
                  f"({sum(i['coarsening_rounds'])} coarsening, {i['refine_rounds']} swap), "
                  f"{i['swaps']} swaps (replicas={i['replicas']}, kicks={i['kicks']})"
                  + ("; the start was better and is kept" if i["kept_start"] else ""))
        else:
            print(f"distributed swap rounds on {i['ranks']} ranks: {i['rounds']} rounds, {i['swaps']} "
                  f"swaps (replicas={i['replicas']}, kicks={i['kicks']})")
    if mended[0]:
        print(f"moved {2 * mended[0]} ranks so that hydra keeps every host whole (J +{100 * mended[1]:.2f} %; "
              "see docs/launchers.md)")
    if written:
        print_relaunch(written, graph.n, recorded_program(args.input), notes)
    else:
        moved = int(np.count_nonzero(mapping.pe_of_task != before_pe))
        print(f"{moved} of {graph.n} tasks move (use -o FILE --as FORMAT to write a launch file)")
    return 0
