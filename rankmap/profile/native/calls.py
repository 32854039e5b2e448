"""The MPI calls rankmap's interposition library wraps, and the C source of
their wrappers.

Each call is written once: its C parameters as the MPI standard gives them
and the statement (``rankmap_pmpi.h``) that records a successful call.
From that one line come the C wrapper ``MPI_X`` (calls ``PMPI_X``) and, for
the ``mpif.h`` / ``use mpi`` bindings, the Fortran wrapper in the four
common manglings (``mpi_x``, ``mpi_x_``, ``mpi_x__``, ``MPI_X``; each calls
the MPI library's Fortran entry of the same mangling, ``pmpi_x_`` ...),
which turns integer handles into C handles (``MPI_Comm_f2c`` ...) before it
records.  Open MPI's Fortran bindings call the ``PMPI_`` C functions, so
without these a Fortran program records nothing; MPICH's call ``MPI_``, and
the depth counter keeps them from counting twice.

Families are generated, as the standard builds them: every blocking
collective has its nonblocking ``I`` form (a request more) and its
persistent ``_init`` form (info, request: counted at each ``MPI_Start``);
every call with counts has its large-count ``_c`` form (MPI-4, C only).
Only the calls the MPI's header declares are wrapped (``generate``).

Receives, barriers and the completion calls (``Wait``, ``Test`` and their
``all``/``any``/``some`` forms) send nothing; they are wrapped for the event
log: a receive is a post, a barrier a collective, and a completion call
claims the requests it names before it runs (``before``) and logs the waits
of those it completed after.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the MPI-4 C parameters of one point-to-point send
_SEND = "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm"
_SENDRECV = ("const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, "
             "void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm")
_REPLACE = ("void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, "
            "int recvtag, MPI_Comm comm")
_VECTOR = "const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op"
_BLOCKS = ("const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, "
           "MPI_Datatype recvtype")
_BLOCKS_V = ("const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, "
             "const int recvcounts[], const int displs[], MPI_Datatype recvtype")
_ALLTOALLV = ("const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, "
              "void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype")
_ALLTOALLW = ("const void *sendbuf, const int sendcounts[], const int sdispls[], "
              "const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], "
              "const int rdispls[], const MPI_Datatype recvtypes[]")
_NEIGHBOR_W = _ALLTOALLW.replace("const int sdispls[]", "const MPI_Aint sdispls[]") \
    .replace("const int rdispls[]", "const MPI_Aint rdispls[]")
_RECV = "void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm"
_ORIGIN = "int origin_count, MPI_Datatype origin_datatype"
_TARGET = "int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype"


@dataclass(frozen=True)
class Call:
    """One wrapped MPI call: ``record`` runs after it succeeded (``before``:
    ahead of it, for a handle the call frees); ``gated``: only while
    recording and not inside another wrapper; ``c``: a C wrapper is
    generated (Init and Pcontrol are written by hand); ``ierror``: the
    Fortran binding ends with IERROR (all but MPI_PCONTROL)."""

    name: str
    params: str
    record: str = ""
    before: str = ""
    fortran: bool = True
    gated: bool = True
    c: bool = True
    ierror: bool = True


def _p2p() -> list[Call]:
    calls = []
    send = "rm_p2p(comm, dest, count, datatype, {mode}, {req})"
    for mode in ("", "B", "S", "R"):  # a buffered send completes locally: no wait in the log
        calls += [Call(f"{mode}send" if mode else "Send", _SEND,
                       send.format(mode="RM_BUFFERED" if mode == "B" else "RM_BLOCKING", req="RM_NO_REQ")),
                  Call(f"I{mode.lower()}send", _SEND + ", MPI_Request *request",
                       send.format(mode="RM_BUFFERED" if mode == "B" else "RM_NONBLOCKING", req="RM_REQ(request)")),
                  Call(f"{mode}send_init" if mode else "Send_init", _SEND + ", MPI_Request *request",
                       send.format(mode="RM_PERSISTENT", req="RM_REQ(request)"))]
    recv = "rm_recv(comm, source, count, datatype, {mode}, {req}, {status})"
    want = "rm_want_status(source, RM_STATUS(status))"
    sendrecv = "rm_sendrecv(comm, dest, sendcount, sendtype, source, recvcount, recvtype, {req}, {status})"
    replace = "rm_sendrecv(comm, dest, count, datatype, source, count, datatype, {req}, {status})"
    calls += [Call("Recv", _RECV + ", MPI_Status *status",
                   recv.format(mode="RM_BLOCKING", req="RM_NO_REQ", status="RM_STATUS(status)"), before=want),
              Call("Irecv", _RECV + ", MPI_Request *request",
                   recv.format(mode="RM_NONBLOCKING", req="RM_REQ(request)", status="RM_NO_STATUS")),
              Call("Recv_init", _RECV + ", MPI_Request *request",
                   recv.format(mode="RM_PERSISTENT", req="RM_REQ(request)", status="RM_NO_STATUS")),
              Call("Sendrecv", _SENDRECV + ", MPI_Status *status",
                   sendrecv.format(req="RM_NO_REQ", status="RM_STATUS(status)"), before=want),
              Call("Isendrecv", _SENDRECV + ", MPI_Request *request",
                   sendrecv.format(req="RM_REQ(request)", status="RM_NO_STATUS")),
              Call("Sendrecv_replace", _REPLACE + ", MPI_Status *status",
                   replace.format(req="RM_NO_REQ", status="RM_STATUS(status)"), before=want),
              Call("Isendrecv_replace", _REPLACE + ", MPI_Request *request",
                   replace.format(req="RM_REQ(request)", status="RM_NO_STATUS")),
              Call("Psend_init", "const void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, "
                   "int dest, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request",
                   "rm_p2p(comm, dest, (MPI_Count)partitions * count, datatype, RM_PERSISTENT, RM_REQ(request))"),
              Call("Start", "MPI_Request *request", "rm_start(RM_REQUESTS(request), 1)"),
              Call("Startall", "int count, MPI_Request array_of_requests[]",
                   "rm_start(RM_REQUESTS(array_of_requests), count)"),
              Call("Request_free", "MPI_Request *request", before="rm_forget(RM_REQUESTS(request))")]
    return calls + _completions()


def _completions() -> list[Call]:
    """Wait and Test in all forms: claim the named requests, then the waits
    of those that completed (``rm_done``: how many, which, their statuses)."""
    one, many = "MPI_Request *request", "int count, MPI_Request array_of_requests[]"
    some = ("int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[], "
            "MPI_Status array_of_statuses[]")
    claim_one = "rm_claim(RM_REQUESTS(request), 1, RM_STATUS(status))"
    claim_all = "rm_claim(RM_REQUESTS(array_of_requests), count, RM_STATUS({s}))"
    claim_some = "rm_claim(RM_REQUESTS(array_of_requests), incount, RM_STATUS(array_of_statuses))"
    done_some = ("rm_done(*outcount == MPI_UNDEFINED ? 0 : *outcount, array_of_indices, RM_BASE, "
                 "RM_STATUS(array_of_statuses))")
    return [Call("Wait", f"{one}, MPI_Status *status", "rm_done(1, NULL, 0, RM_STATUS(status))", claim_one),
            Call("Test", f"{one}, int *flag, MPI_Status *status",
                 "rm_done(*flag != 0, NULL, 0, RM_STATUS(status))", claim_one),
            Call("Waitall", f"{many}, MPI_Status array_of_statuses[]",
                 "rm_done(count, NULL, 0, RM_STATUS(array_of_statuses))",
                 claim_all.format(s="array_of_statuses")),
            Call("Testall", f"{many}, int *flag, MPI_Status array_of_statuses[]",
                 "rm_done(*flag ? count : 0, NULL, 0, RM_STATUS(array_of_statuses))",
                 claim_all.format(s="array_of_statuses")),
            Call("Waitany", f"{many}, int *index, MPI_Status *status",
                 "rm_done(*index != MPI_UNDEFINED, index, RM_BASE, RM_STATUS(status))",
                 claim_all.format(s="status")),
            Call("Testany", f"{many}, int *index, int *flag, MPI_Status *status",
                 "rm_done(*flag && *index != MPI_UNDEFINED, index, RM_BASE, RM_STATUS(status))",
                 claim_all.format(s="status")),
            Call("Waitsome", some, done_some, claim_some),
            Call("Testsome", some, done_some, claim_some)]


#: blocking collectives: name, parameters without the communicator, record ({req}: NULL or request)
_COLLECTIVES = [
    ("Barrier", "", "rm_vector(comm, RM_BARRIER, 0, MPI_BYTE, 0, {req})"),
    ("Bcast", "void *buffer, int count, MPI_Datatype datatype, int root",
     "rm_vector(comm, RM_BCAST, count, datatype, root, {req})"),
    ("Reduce", _VECTOR + ", int root", "rm_vector(comm, RM_REDUCE, count, datatype, root, {req})"),
    ("Allreduce", _VECTOR, "rm_vector(comm, RM_ALLREDUCE, count, datatype, 0, {req})"),
    ("Scan", _VECTOR, "rm_vector(comm, RM_SCAN, count, datatype, 0, {req})"),
    ("Exscan", _VECTOR, "rm_vector(comm, RM_SCAN, count, datatype, 0, {req})"),
    ("Gather", _BLOCKS + ", int root",
     "rm_rooted(comm, RM_GATHER, root, recvcount, recvtype, sendcount, sendtype, {req})"),
    ("Gatherv", _BLOCKS_V + ", int root",  # the root sends nothing in any model
     "rm_rooted(comm, RM_GATHER, root, 0, sendtype, sendcount, sendtype, {req})"),
    ("Scatter", _BLOCKS + ", int root",
     "rm_rooted(comm, RM_SCATTER, root, sendcount, sendtype, recvcount, recvtype, {req})"),
    ("Scatterv", "const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, "
     "void *recvbuf, int recvcount, MPI_Datatype recvtype, int root",
     "rm_scatterv(comm, RM_COUNTS(sendcounts), sendtype, recvcount, recvtype, root, {req})"),
    ("Allgather", _BLOCKS, "rm_allgatherv(comm, sendcount, sendtype, RM_ONE_COUNT(recvcount), recvtype, {req})"),
    ("Allgatherv", _BLOCKS_V, "rm_allgatherv(comm, sendcount, sendtype, RM_COUNTS(recvcounts), recvtype, {req})"),
    ("Alltoall", _BLOCKS, "rm_alltoallw(comm, RM_IN_PLACE(sendbuf), RM_ONE_COUNT(sendcount), RM_ONE(sendtype), "
     "RM_ONE_COUNT(recvcount), RM_ONE(recvtype), {req})"),
    ("Alltoallv", _ALLTOALLV, "rm_alltoallw(comm, RM_IN_PLACE(sendbuf), RM_COUNTS(sendcounts), RM_ONE(sendtype), "
     "RM_COUNTS(recvcounts), RM_ONE(recvtype), {req})"),
    ("Alltoallw", _ALLTOALLW, "rm_alltoallw(comm, RM_IN_PLACE(sendbuf), RM_COUNTS(sendcounts), "
     "RM_HANDLES(sendtypes), RM_COUNTS(recvcounts), RM_HANDLES(recvtypes), {req})"),
    ("Reduce_scatter_block", "const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, "
     "MPI_Op op", "rm_vector(comm, RM_REDUCE_SCATTER, recvcount, datatype, 0, {req})"),
    ("Reduce_scatter", "const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, "
     "MPI_Op op", "rm_reduce_scatter(comm, RM_COUNTS(recvcounts), datatype, {req})"),
    ("Neighbor_allgather", _BLOCKS, "rm_neighbors(comm, RM_ONE_COUNT(sendcount), RM_ONE(sendtype), {req})"),
    ("Neighbor_allgatherv", _BLOCKS_V, "rm_neighbors(comm, RM_ONE_COUNT(sendcount), RM_ONE(sendtype), {req})"),
    ("Neighbor_alltoall", _BLOCKS, "rm_neighbors(comm, RM_ONE_COUNT(sendcount), RM_ONE(sendtype), {req})"),
    ("Neighbor_alltoallv", _ALLTOALLV, "rm_neighbors(comm, RM_COUNTS(sendcounts), RM_ONE(sendtype), {req})"),
    ("Neighbor_alltoallw", _NEIGHBOR_W, "rm_neighbors(comm, RM_COUNTS(sendcounts), RM_HANDLES(sendtypes), {req})"),
]


def _collectives() -> list[Call]:
    calls = []
    for name, params, record in _COLLECTIVES:
        params += ", MPI_Comm comm"
        now = record.format(req="NULL")
        calls += [Call(name, params, now),
                  Call("I" + name[0].lower() + name[1:], params + ", MPI_Request *request",
                       f"({now}, rm_untracked(RM_REQ(request)))"),
                  Call(name + "_init", params + ", MPI_Info info, MPI_Request *request",
                       record.format(req="request"))]
    return calls


def _one_sided() -> list[Call]:
    put = "rm_rma(win, target_rank, origin_count, origin_datatype, 0, origin_datatype)"
    get = "rm_rma(win, target_rank, 0, origin_datatype, origin_count, origin_datatype)"
    both = "rm_rma(win, target_rank, origin_count, origin_datatype, result_count, result_datatype)"
    one = "rm_rma(win, target_rank, 1, datatype, 1, datatype)"
    origin_put = f"const void *origin_addr, {_ORIGIN}, {_TARGET}"
    accumulate = f"{origin_put}, MPI_Op op"
    get_acc = (f"const void *origin_addr, {_ORIGIN}, void *result_addr, int result_count, "
               f"MPI_Datatype result_datatype, {_TARGET}, MPI_Op op")
    calls = []
    for name, params, record in (("Put", origin_put, put), ("Get", f"void *origin_addr, {_ORIGIN}, {_TARGET}", get),
                                 ("Accumulate", accumulate, put), ("Get_accumulate", get_acc, both)):
        calls += [Call(name, params + ", MPI_Win win", record),
                  Call("R" + name.lower(), params + ", MPI_Win win, MPI_Request *request", record)]
    calls += [Call("Fetch_and_op", "const void *origin_addr, void *result_addr, MPI_Datatype datatype, "
                   "int target_rank, MPI_Aint target_disp, MPI_Op op, MPI_Win win", one),
              Call("Compare_and_swap", "const void *origin_addr, const void *compare_addr, void *result_addr, "
                   "MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Win win", one)]
    return calls


_WIDE = {r"\bint (count|sendcount|recvcount|origin_count|target_count|result_count)\b": r"MPI_Count \1",
         r"\bconst int (sendcounts|recvcounts)\[\]": r"const MPI_Count \1[]",
         r"\bconst int (displs|sdispls|rdispls)\[\]": r"const MPI_Aint \1[]"}


def _large_count(call: Call) -> Call | None:
    """The ``_c`` form of a call with counts of a datatype (MPI_Count counts,
    MPI_Aint displacements); a count of requests stays an ``int``."""
    params = call.params
    for pattern, repl in _WIDE.items():
        params = re.sub(pattern, repl, params)
    if params == call.params or "partitions" in params or "MPI_Datatype" not in params:
        return None
    return Call(call.name + "_c", params, call.record, call.before, fortran=False, ierror=False)


_BY_HAND = [  # Fortran only: the C ones are in rankmap_pmpi.c
    Call("Init", "", "rm_begin()", gated=False, c=False),
    Call("Init_thread", "int required, int *provided", "rm_begin()", gated=False, c=False),
    Call("Pcontrol", "const int level", "rm_pcontrol(level)", c=False, ierror=False),
]


def all_calls() -> list[Call]:
    """Every call the library wraps (the large-count forms included)."""
    base = _p2p() + _collectives() + _one_sided()
    return base + [w for w in map(_large_count, base) if w is not None] + _BY_HAND


# ------------------------------------------------------------------ C text
@dataclass(frozen=True)
class Param:
    ctype: str     # without the name: "const int", "MPI_Request"
    name: str
    pointer: bool  # "*name"
    array: bool    # "name[]"

    @property
    def decl(self) -> str:
        return f"{self.ctype} {'*' if self.pointer else ''}{self.name}{'[]' if self.array else ''}"

    @property
    def base(self) -> str:
        return self.ctype.removeprefix("const ").strip()


def parse_params(text: str) -> list[Param]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.fullmatch(r"(.+?)\s*(\*?)\s*(\w+)\s*(\[\])?", part)
        if not m:
            raise ValueError(f"cannot read the C parameter {part!r}")
        out.append(Param(m.group(1).strip(), m.group(3), bool(m.group(2)), bool(m.group(4))))
    return out


def _names(statement: str) -> set[str]:
    """The names a statement reads through the wrapper's C-typed locals (not
    those that RM_STATUS and RM_REQUESTS read from the arguments themselves)."""
    return set(re.findall(r"\b\w+\b", re.sub(r"\bRM_(STATUS|REQUESTS)\(\w+\)", "", statement)))


def _c_wrapper(call: Call) -> str:
    params = parse_params(call.params)
    args = ", ".join(p.name for p in params)
    gate = "rm_on()" if call.gated else "1"
    lines = [f"int MPI_{call.name}({', '.join(p.decl for p in params) or 'void'})", "{"]
    if call.before:
        lines.append(f"    if ({gate}) {call.before};")
    lines += ["    rm_depth++;", f"    int rc = PMPI_{call.name}({args});", "    rm_depth--;"]
    if call.record:
        lines.append(f"    if (rc == MPI_SUCCESS && {gate}) {call.record};")
    lines += ["    return rc;", "}", ""]
    return "\n".join(lines)


def _fortran_param(p: Param) -> tuple[str, str]:
    """(the Fortran wrapper's declaration, the name passed on) of a C parameter:
    buffers stay addresses, everything else is a reference to an integer
    (MPI_Fint), an address-sized integer (MPI_Aint) or a count (MPI_Count)."""
    if p.base == "void":
        return f"void *{p.name}", p.name
    kind = {"MPI_Aint": "MPI_Aint", "MPI_Count": "MPI_Count"}.get(p.base, "MPI_Fint")
    return f"{kind} *{p.name}_f", f"{p.name}_f"


_F2C = {"MPI_Datatype": "PMPI_Type_f2c", "MPI_Comm": "PMPI_Comm_f2c", "MPI_Win": "PMPI_Win_f2c"}


def _fortran_local(p: Param) -> list[str]:
    """C-typed locals named as the C parameter, so the record statement reads the same."""
    f = f"{p.name}_f"
    if p.base in ("void", "MPI_Status"):
        return []  # a buffer: the same address; statuses: RM_STATUS reaches the argument itself
    if p.array:
        return [f"    const {'MPI_Fint' if p.base in ('int', 'MPI_Datatype', 'MPI_Request') else p.base} "
                f"*{p.name} = {f};"]
    if p.base == "MPI_Request" and p.pointer:
        return [f"    MPI_Request {p.name}_c = PMPI_Request_f2c(*{f});",
                f"    MPI_Request *{p.name} = &{p.name}_c;"]
    if p.base in _F2C:
        return [f"    {p.base} {p.name} = {_F2C[p.base]}(*{f});"]
    if p.base in ("int", "MPI_Aint", "MPI_Count") and not p.pointer:
        return [f"    {p.base} {p.name} = ({p.base})*{f};"]
    if p.base == "int":  # an output (flag, index, outcount): read after the call
        return [f"    const MPI_Fint *{p.name} = {f};"]
    raise ValueError(f"no Fortran conversion for {p.decl}")


def _fortran_wrappers(call: Call) -> str:
    params = parse_params(call.params)
    decls, passed = zip(*map(_fortran_param, params)) if params else ((), ())
    if call.ierror:
        decls, passed = [*decls, "MPI_Fint *ierr"], [*passed, "ierr"]
    sig, args = ", ".join(decls), ", ".join(passed)
    kinds = ", ".join(d.rsplit("*", 1)[0] + "*" for d in decls)
    gate = "rm_on()" if call.gated else "1"
    impl = f"rm_f_{call.name}"

    def block(statement):
        used = _names(statement)
        locals_ = [ln for p in params if p.name in used for ln in _fortran_local(p)]
        return ["    {", *("    " + ln for ln in locals_), f"        {statement};", "    }"]

    lines = [f"typedef void (*{impl}_t)({kinds});",
             f"static void {impl}({impl}_t next, {sig})", "{"]
    if call.before:
        lines += [f"    if ({gate})", *block(call.before)]
    lines += ["    rm_depth++;", f"    next({args});", "    rm_depth--;"]
    if call.record:
        ok = "*ierr == MPI_SUCCESS && " if call.ierror else ""
        lines += [f"    if ({ok}{gate})", *block(call.record)]
    lines += ["}", ""]
    lower = f"mpi_{call.name.lower()}"
    for symbol, real in ((lower, "p" + lower), (lower + "_", f"p{lower}_"), (lower + "__", f"p{lower}__"),
                         (lower.upper(), "P" + lower.upper())):
        lines += [f"void {symbol}({sig})", "{", f"    static {impl}_t next;",
                  f"    if (!next) next = ({impl}_t)rm_fortran_next(\"{real}\");",
                  f"    {impl}(next, {args});", "}", ""]
    return "\n".join(lines)


HEADER = """\
/* The MPI calls rankmap records, generated by rankmap/profile/native/calls.py
 * for the MPI whose header declares them.  Do not edit: edit calls.py. */
#include "rankmap_pmpi.h"

"""


def fortran_handles(declared: set[str]) -> bool:
    """True when the MPI's header has Fortran handles (``MPI_Fint`` and its
    ``_f2c`` conversions, functions or macros): MPICH's standard ABI
    (``mpi_abi.h``) has none."""
    return "MPI_Fint" in declared


def generate(declared: set[str]) -> str:
    """C source of the wrappers of every call whose ``PMPI_`` function is in
    ``declared`` (the names the MPI's ``mpi.h`` declares), then of their
    Fortran bindings where the MPI has Fortran handles."""
    calls = all_calls()
    ours = [c for c in calls if c.c and f"PMPI_{c.name}" in declared]
    fortran = [c for c in calls if c.fortran and (not c.c or f"PMPI_{c.name}" in declared)] \
        if fortran_handles(declared) else []
    out = [HEADER, "#define RM_IN_PLACE(b) ((const void *)(b) == MPI_IN_PLACE)\n",
           "#define RM_HANDLES(x) ((rm_handles){(const void *)(x), 0, 1})\n",
           "#define RM_REQUESTS(x) ((rm_handles){(const void *)(x), 0, 1})\n",
           "#define RM_REQ(x) ((rm_req){(x), (const void *)(x)})\n",
           "#define RM_STATUS(x) ((rm_status){(void **)&(x), 0})\n",
           "#define RM_BASE 0\n\n"]
    out += [_c_wrapper(c) for c in ours]
    if not fortran:
        return "".join(out)
    out += ["/* Fortran (mpif.h, use mpi): arguments by reference, integer handles */\n",
            "_Static_assert(sizeof(MPI_Fint) == sizeof(int), \"Fortran integer counts are C ints\");\n",
            "#undef RM_IN_PLACE\n#undef RM_HANDLES\n#undef RM_REQUESTS\n#undef RM_REQ\n#undef RM_STATUS\n"
            "#undef RM_BASE\n",
            "#define RM_IN_PLACE(b) rm_fortran_in_place(b)\n",
            "#define RM_HANDLES(x) ((rm_handles){(const void *)(x), 1, 1})\n",
            "#define RM_REQUESTS(x) ((rm_handles){(const void *)(x##_f), 1, 1})  /* integer handles */\n",
            "#define RM_REQ(x) ((rm_req){(x), (const void *)(x##_f)})  /* kept in a Fortran integer */\n",
            "#define RM_STATUS(x) ((rm_status){(void **)&(x##_f), 1})  /* integer statuses */\n",
            "#define RM_BASE 1  /* Fortran's request indices */\n\n"]
    out += [_fortran_wrappers(c) for c in fortran]
    return "".join(out)


def declared_names(preprocessed_header: str) -> set[str]:
    """The ``PMPI_`` functions a preprocessed ``mpi.h`` declares, and
    ``MPI_Fint`` when it has Fortran handles: a ``_f2c`` function (Open
    MPI's ``MPI_Fint`` is a macro) or the ``MPI_Fint`` type (MPICH 4's
    ``_f2c`` are macros)."""
    names = set(re.findall(r"\b(PMPI_\w+)\s*\(", preprocessed_header))
    if "PMPI_Comm_f2c" in names or re.search(r"\btypedef\b[^;]*\bMPI_Fint\s*;", preprocessed_header):
        names.add("MPI_Fint")
    return names
