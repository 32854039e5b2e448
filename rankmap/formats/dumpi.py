"""SST DUMPI binary traces: a ``.meta`` file and one ``.bin`` per rank
(``PREFIX-NNNN.bin``, NNNN the COMM_WORLD rank), read from the format's
public definition (sst-dumpi ``dumpi/common/io.c``, ``iodefs.h``,
``dumpiio.c``); no DUMPI library is needed.

A ``.bin`` file ends in an index of 64-bit big-endian offsets (header,
body, footer, datatype sizes, ...); the body is a stream of records, each
``u16 function label, u8 config mask, [u16 thread], [cpu times], [wall
times], [perf counters]`` followed by the function's arguments
(``_LAYOUT``).  The stream is read in chunks, so memory stays bounded by
the pair tables, not the trace length.  The footer holds the number of
calls of each function, which the reader checks against the records it
read (a truncated or corrupt body fails that check).

Communicator handles are local to a rank, so traffic is kept per (rank,
communicator instance, peer) and resolved to world ranks at the end: a
communicator made by ``Comm_dup``, ``Comm_split`` or ``Cart_create`` is
identified across ranks by its parent and the creation's position among
the parent's creations (MPI makes every member create them in the same
order); ``Comm_create``, ``Cart_sub``, graph and inter-communicators are
refused by name when traffic uses them.  ``Cart_create`` is taken without
reordering.  The header's host name gives each rank's host.
"""

from __future__ import annotations

import glob
import os
import re
import struct

from ..trace import Trace
from .common import FormatError
from .traffic_table import PairTable, Progress, collective_plan

_HEAD_MAGIC = 0xFFAADD44554D5049
_FOOT_MAGIC = 0xF007FEE7
_COMM_NULL, _COMM_WORLD, _COMM_SELF = 1, 2, 3
_TIME_CPU, _TIME_WALL, _THREADID, _PERFINFO, _STATUSES = 1 << 2, 1 << 3, 1 << 6, 1 << 7, 3
_CHUNK = 1 << 22

# One line per function label, in label order: the function, then its
# arguments as CODE:NAME.  Codes: b u8, h u16, i u32, q u64; I u32 array,
# H u16 array, B u8 array (u32 length first); c char array, C array of
# char arrays, D array of arrays of char arrays; J array of u32 arrays;
# s statuses; A argc char arrays (Init).  "x==y?" reads the field only when
# the named fields are equal.  "-" marks labels with no record.
_LAYOUT = """\
Send i:count h:datatype i:dest i:tag h:comm
Recv i:count h:datatype i:source i:tag h:comm s:status
Get_count s:status h:datatype i:count
Bsend i:count h:datatype i:dest i:tag h:comm
Ssend i:count h:datatype i:dest i:tag h:comm
Rsend i:count h:datatype i:dest i:tag h:comm
Buffer_attach i:size
Buffer_detach i:size
Isend i:count h:datatype i:dest i:tag h:comm i:request
Ibsend i:count h:datatype i:dest i:tag h:comm i:request
Issend i:count h:datatype i:dest i:tag h:comm i:request
Irsend i:count h:datatype i:dest i:tag h:comm i:request
Irecv i:count h:datatype i:source i:tag h:comm i:request
Wait i:request s:status
Test i:request i:flag s:status
Request_free i:request
Waitany i:count I:requests i:index s:status
Testany i:count I:requests i:index i:flag s:status
Waitall i:count I:requests s:statuses
Testall i:count I:requests i:flag s:statuses
Waitsome i:count I:requests i:outcount I:indices s:statuses
Testsome i:count I:requests i:outcount I:indices s:statuses
Iprobe i:source i:tag h:comm i:flag s:status
Probe i:source i:tag h:comm s:status
Cancel i:request
Test_cancelled s:status i:cancelled
Send_init i:count h:datatype i:dest i:tag h:comm i:request
Bsend_init i:count h:datatype i:dest i:tag h:comm i:request
Ssend_init i:count h:datatype i:dest i:tag h:comm i:request
Rsend_init i:count h:datatype i:dest i:tag h:comm i:request
Recv_init i:count h:datatype i:source i:tag h:comm i:request
Start i:request
Startall i:count I:requests
Sendrecv i:sendcount h:sendtype i:dest i:sendtag i:recvcount h:recvtype i:source i:recvtag h:comm s:status
Sendrecv_replace i:count h:datatype i:dest i:sendtag i:source i:recvtag h:comm s:status
Type_contiguous i:count h:oldtype h:newtype
Type_vector i:count i:blocklength i:stride h:oldtype h:newtype
Type_hvector i:count i:blocklength i:stride h:oldtype h:newtype
Type_indexed i:count I:lengths I:indices h:oldtype h:newtype
Type_hindexed i:count I:lengths I:indices h:oldtype h:newtype
Type_struct i:count I:lengths I:indices H:oldtypes h:newtype
Address i:address
Type_extent h:datatype i:extent
Type_size h:datatype i:size
Type_lb h:datatype i:lb
Type_ub h:datatype i:ub
Type_commit h:datatype
Type_free h:datatype
Get_elements s:status h:datatype i:elements
Pack i:incount h:datatype i:outcount i:_ i:_ h:comm
Unpack i:incount i:_ i:_ i:outcount h:datatype h:comm
Pack_size i:incount h:datatype h:comm i:size
Barrier h:comm
Bcast i:count h:datatype i:root h:comm
Gather i:commrank i:sendcount h:sendtype i:root h:comm commrank==root?i:recvcount commrank==root?h:recvtype
Gatherv i:commrank i:commsize i:sendcount h:sendtype i:root h:comm commrank==root?I:recvcounts commrank==root?I:displs h:recvtype
Scatter i:commrank i:recvcount h:recvtype i:root h:comm commrank==root?i:sendcount commrank==root?h:sendtype
Scatterv i:commrank i:commsize h:sendtype i:recvcount h:recvtype i:root h:comm commrank==root?I:sendcounts commrank==root?I:displs
Allgather i:sendcount h:sendtype i:recvcount h:recvtype h:comm
Allgatherv i:commsize i:sendcount h:sendtype I:recvcounts I:displs h:recvtype h:comm
Alltoall i:sendcount h:sendtype i:recvcount h:recvtype h:comm
Alltoallv i:commsize I:sendcounts I:senddispls h:sendtype I:recvcounts I:recvdispls h:recvtype h:comm
Reduce i:count h:datatype b:op i:root h:comm
Op_create i:commute b:op
Op_free b:op
Allreduce i:count h:datatype b:op h:comm
Reduce_scatter i:commsize I:recvcounts h:datatype b:op h:comm
Scan i:count h:datatype b:op h:comm
Group_size h:group i:size
Group_rank h:group i:rank
Group_translate_ranks h:group1 i:count I:ranks1 h:group2 I:ranks2
Group_compare h:group1 h:group2 b:result
Comm_group h:comm h:group
Group_union h:group1 h:group2 h:newgroup
Group_intersection h:group1 h:group2 h:newgroup
Group_difference h:group1 h:group2 h:newgroup
Group_incl h:group i:count I:ranks h:newgroup
Group_excl h:group i:count I:ranks h:newgroup
Group_range_incl h:group i:count J:ranges h:newgroup
Group_range_excl h:group i:count J:ranges h:newgroup
Group_free h:group
Comm_size h:comm i:size
Comm_rank h:comm i:rank
Comm_compare h:comm1 h:comm2 b:result
Comm_dup h:oldcomm h:newcomm
Comm_create h:oldcomm h:group h:newcomm
Comm_split h:oldcomm i:color i:key h:newcomm
Comm_free h:comm
Comm_test_inter h:comm i:inter
Comm_remote_size h:comm i:size
Comm_remote_group h:comm h:group
Intercomm_create h:localcomm i:localleader h:remotecomm i:remoteleader i:tag h:newcomm
Intercomm_merge h:comm i:high h:newcomm
Keyval_create h:key
Keyval_free h:key
Attr_put h:comm i:key
Attr_get h:comm i:key i:flag
Attr_delete h:comm i:key
Topo_test h:comm b:topo
Cart_create h:oldcomm i:ndim I:dims I:periods i:reorder h:newcomm
Dims_create i:nodes i:ndim I:_ I:_
Graph_create i:numedges h:oldcomm i:nodes I:index I:edges i:reorder h:newcomm
Graphdims_get h:comm i:nodes i:edges
Graph_get i:totedges i:totnodes h:comm i:maxindex i:maxedges I:index I:edges
Cartdim_get h:comm i:ndim
Cart_get i:ndim h:comm i:maxdims I:dims I:periods I:coords
Cart_rank i:ndim h:comm I:coords i:rank
Cart_coords i:ndim h:comm i:rank i:maxdims I:coords
Graph_neighbors_count h:comm i:rank i:nneigh
Graph_neighbors i:nneigh h:comm i:rank i:maxneighbors I:neighbors
Cart_shift h:comm i:direction i:displ i:source i:dest
Cart_sub i:ndim h:oldcomm I:remain_dims h:newcomm
Cart_map h:comm i:ndim I:dims I:period i:newrank
Graph_map i:numedges h:comm i:nodes I:index I:edges i:newrank
Get_processor_name c:name i:resultlen
Get_version i:version i:subversion
Errhandler_create h:errhandler
Errhandler_set h:comm h:errhandler
Errhandler_get h:comm h:errhandler
Errhandler_free h:errhandler
Error_string i:errorcode c:errorstring i:resultlen
Error_class i:errorcode i:errorclass
Wtime 
Wtick 
Init i:argc A:argv
Finalize 
Initialized i:result
Abort h:comm i:errorcode
Pcontrol -
Close_port c:portname
Comm_accept c:portname h:info i:root h:oldcomm h:newcomm
Comm_connect c:portname h:info i:root h:oldcomm h:newcomm
Comm_disconnect h:comm
Comm_get_parent h:parent
Comm_join i:fd h:comm
Comm_spawn i:oldcommrank i:root h:oldcomm h:newcomm oldcommrank==root?c:command oldcommrank==root?C:argv oldcommrank==root?i:maxprocs oldcommrank==root?h:info oldcommrank==root?I:errcodes
Comm_spawn_multiple i:totprocs i:oldcommrank i:root h:oldcomm h:newcomm oldcommrank==root?i:count oldcommrank==root?C:commands oldcommrank==root?D:argvs oldcommrank==root?I:maxprocs oldcommrank==root?H:info oldcommrank==root?I:errcodes
Lookup_name c:servicename h:info c:portname
Open_port h:info c:portname
Publish_name c:servicename h:info c:portname
Unpublish_name c:servicename h:info c:portname
Accumulate i:origincount h:origintype i:targetrank i:targetdisp i:targetcount h:targettype b:op h:win
Get i:origincount h:origintype i:targetrank i:targetdisp i:targetcount h:targettype h:win
Put i:origincount h:origintype i:targetrank i:targetdisp i:targetcount h:targettype h:win
Win_complete h:win
Win_create i:size i:dispunit h:info h:comm h:win
Win_fence b:assertion h:win
Win_free h:win
Win_get_group h:win h:group
Win_lock b:locktype i:winrank b:assertion h:win
Win_post h:group b:assertion h:win
Win_start h:group b:assertion h:win
Win_test h:win i:flag
Win_unlock i:winrank h:win
Win_wait h:win
Alltoallw i:commsize I:sendcounts I:senddispls H:sendtypes I:recvcounts I:recvdispls H:recvtypes h:comm
Exscan i:count h:datatype b:op h:comm
Add_error_class i:errorclass
Add_error_code i:errorclass i:errorcode
Add_error_string i:errorcode c:errorstring
Comm_call_errhandler h:comm i:errorcode
Comm_create_keyval h:keyval
Comm_delete_attr h:comm h:keyval
Comm_free_keyval h:keyval
Comm_get_attr h:comm h:keyval i:flag
Comm_get_name h:comm c:name i:resultlen
Comm_set_attr h:comm h:keyval
Comm_set_name h:comm c:name
File_call_errhandler h:file i:errorcode
Grequest_complete i:request
Grequest_start i:request
Init_thread b:required b:provided
Is_thread_main i:flag
Query_thread b:supported
Status_set_cancelled s:status i:flag
Status_set_elements s:status h:datatype i:count
Type_create_keyval h:keyval
Type_delete_attr h:datatype h:keyval
Type_dup h:oldtype h:newtype
Type_free_keyval h:keyval
Type_get_attr h:datatype h:keyval i:flag
Type_get_contents i:numdatatypes i:numaddresses i:numintegers h:datatype i:maxintegers i:maxaddresses i:maxdatatypes I:arrintegers I:arraddresses H:arrdatatypes
Type_get_envelope h:datatype i:numintegers i:numaddresses i:numdatatypes b:combiner
Type_get_name h:datatype c:name i:resultlen
Type_set_attr h:datatype h:keyval
Type_set_name h:datatype c:name
Type_match_size b:typeclass i:size h:datatype
Win_call_errhandler h:win i:errorcode
Win_create_keyval h:keyval
Win_delete_attr h:win h:keyval
Win_free_keyval h:keyval
Win_get_attr h:win h:keyval i:flag
Win_get_name h:win c:name i:resultlen
Win_set_attr h:win h:keyval
Win_set_name h:win c:name
Alloc_mem i:size h:info
Comm_create_errhandler h:errhandler
Comm_get_errhandler h:comm h:errhandler
Comm_set_errhandler h:comm h:errhandler
File_create_errhandler h:errhandler
File_get_errhandler h:file h:errhandler
File_set_errhandler h:file h:errhandler
Finalized i:flag
Free_mem 
Get_address i:address
Info_create h:info
Info_delete h:info c:key
Info_dup h:oldinfo h:newinfo
Info_free h:info
Info_get h:info c:key i:valuelength c:value i:flag
Info_get_nkeys h:info i:nkeys
Info_get_nthkey h:info i:n c:key
Info_get_valuelen h:info c:key i:valuelen i:flag
Info_set h:info c:key c:value
Pack_external c:datarep i:incount h:intype i:outcount i:_ i:_
Pack_external_size c:datarep i:incount h:datatype i:size
Request_get_status i:request i:flag s:status
Type_create_darray i:size i:rank i:ndims I:gsizes B:distribs I:dargs I:psizes b:order h:oldtype h:newtype
Type_create_hindexed i:count I:blocklengths I:displacements h:oldtype h:newtype
Type_create_hvector i:count i:blocklength i:stride h:oldtype h:newtype
Type_create_indexed_block i:count i:blocklength I:displacments h:oldtype h:newtype
Type_create_resized h:oldtype i:lb i:extent h:newtype
Type_create_struct i:count I:blocklengths I:displacements H:oldtypes h:newtype
Type_create_subarray i:ndims I:sizes I:subsizes I:starts b:order h:oldtype h:newtype
Type_get_extent h:datatype i:lb i:extent
Type_get_true_extent h:datatype i:lb i:extent
Unpack_external c:datarep i:insize i:_ i:_ i:outcount h:datatype
Win_create_errhandler h:errhandler
Win_get_errhandler h:win h:errhandler
Win_set_errhandler h:win h:errhandler
File_open h:comm c:filename b:amode h:info h:file
File_close h:file
File_delete c:filename h:info
File_set_size h:file q:size
File_preallocate h:file q:size
File_get_size h:file q:size
File_get_group h:file h:group
File_get_amode h:file b:amode
File_set_info h:file h:info
File_get_info h:file h:info
File_set_view h:file q:offset h:hosttype h:filetype c:datarep h:info
File_get_view h:file q:offset h:hosttype h:filetype c:datarep
File_read_at h:file q:offset i:count h:datatype s:status
File_read_at_all h:file q:offset i:count h:datatype s:status
File_write_at h:file q:offset i:count h:datatype s:status
File_write_at_all h:file q:offset i:count h:datatype s:status
File_iread_at h:file q:offset i:count h:datatype i:request
File_iwrite_at h:file q:offset i:count h:datatype i:request
File_read h:file i:count h:datatype s:status
File_read_all h:file i:count h:datatype s:status
File_write h:file i:count h:datatype s:status
File_write_all h:file i:count h:datatype s:status
File_iread h:file i:count h:datatype i:request
File_iwrite h:file i:count h:datatype i:request
File_seek h:file q:offset b:whence
File_get_position h:file q:offset
File_get_byte_offset h:file q:offset q:bytes
File_read_shared h:file i:count h:datatype s:status
File_write_shared h:file i:count h:datatype s:status
File_iread_shared h:file i:count h:datatype i:request
File_iwrite_shared h:file i:count h:datatype i:request
File_read_ordered h:file i:count h:datatype s:status
File_write_ordered h:file i:count h:datatype s:status
File_seek_shared h:file q:offset b:whence
File_get_position_shared h:file q:offset
File_read_at_all_begin h:file q:offset i:count h:datatype
File_read_at_all_end h:file s:status
File_write_at_all_begin h:file q:offset i:count h:datatype
File_write_at_all_end h:file s:status
File_read_all_begin h:file i:count h:datatype
File_read_all_end h:file s:status
File_write_all_begin h:file i:count h:datatype
File_write_all_end h:file s:status
File_read_ordered_begin h:file i:count h:datatype
File_read_ordered_end h:file s:status
File_write_ordered_begin h:file i:count h:datatype
File_write_ordered_end h:file s:status
File_get_type_extent h:file h:datatype i:extent
Register_datarep c:name
File_set_atomicity h:file i:flag
File_get_atomicity h:file i:flag
File_sync h:file
IO_Test i:request i:flag s:status
IO_Wait i:request s:status
IO_Testall i:count I:requests i:flag s:statuses
IO_Waitall i:count I:requests s:statuses
IO_Testany i:count I:requests i:flag i:index s:statuses
IO_Waitany i:count I:requests i:index s:statuses
IO_Waitsome i:count I:requests i:outcount I:indices s:statuses
IO_Testsome i:count I:requests i:outcount I:indices s:statuses
ALL_FUNCTIONS -
Function_enter q:fn
Function_exit q:fn
END_OF_STREAM -
"""


def _compile():
    names, specs = [], []
    for line in _LAYOUT.splitlines():
        name, _, rest = line.partition(" ")
        names.append(name)
        fields = []
        for tok in rest.split():
            if tok == "-":
                fields = None
                break
            cond, _, body = tok.rpartition("?")
            code, _, fname = body.partition(":")
            fields.append((code, fname, tuple(cond.split("==")) if cond else None))
        specs.append(fields)
    return names, specs


FUNCTIONS, _SPECS = _compile()
_LABEL = {n: i for i, n in enumerate(FUNCTIONS)}
_END = _LABEL["END_OF_STREAM"]
_ALL = _LABEL["ALL_FUNCTIONS"]
_FIXED = {"b": struct.Struct(">B"), "h": struct.Struct(">H"), "i": struct.Struct(">i"),
          "q": struct.Struct(">Q")}
_LABEL_MASK = struct.Struct(">HB")
_SIGNED16 = {"comm", "oldcomm", "newcomm", "datatype", "sendtype", "recvtype"}


class _Stream:
    """Big-endian reads from a file in chunks; ``record`` counts the
    records read, for error lines."""

    def __init__(self, fh, path, start, end):
        self.fh, self.path, self.end = fh, path, end
        fh.seek(start)
        self.base, self.buf, self.pos = start, b"", 0
        self.record = 0

    def need(self, n):
        if self.pos + n <= len(self.buf):
            return
        if self.base + self.pos + n > self.end:
            raise FormatError(f"{self.path}: record {self.record}: runs past the end of the "
                              "event stream (truncated or corrupt file)")
        rest = self.buf[self.pos:]
        self.base += self.pos
        self.buf = rest + self.fh.read(max(_CHUNK, n))
        self.pos = 0

    def take(self, fmt: struct.Struct):
        self.need(fmt.size)
        v = fmt.unpack_from(self.buf, self.pos)[0]
        self.pos += fmt.size
        return v

    def skip(self, n):
        self.need(n)
        self.pos += n

    def array(self, width):
        n = self.take(_FIXED["i"])
        if n < 0:
            raise FormatError(f"{self.path}: record {self.record}: negative array length {n}")
        if width == "i":
            self.need(4 * n)
            v = struct.unpack_from(f">{n}i", self.buf, self.pos)
            self.pos += 4 * n
            return v
        self.skip(n * width)
        return n

    @property
    def offset(self):
        return self.base + self.pos


def _u64(fh, off):
    fh.seek(off)
    b = fh.read(8)
    if len(b) < 8:
        raise EOFError
    return struct.unpack(">Q", b)[0]


class _RankFile:
    """Index, header, footer and datatype sizes of one rank's ``.bin``."""

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        try:
            with open(path, "rb") as fh:
                if size < 48 or _u64(fh, 0) != _HEAD_MAGIC:
                    raise FormatError(f"{path}: not a DUMPI trace (no DUMPI magic at the start)")
                for k in (8, 7, 6, 5):
                    if size >= 8 * k + 8 and _u64(fh, size - 8 * k) == _HEAD_MAGIC:
                        vals = [_u64(fh, size - 8 * k + 8 * j) for j in range(1, k)]
                        break
                else:
                    raise FormatError(f"{path}: no DUMPI index at the end of the file (truncated)")
                vals = [0] * (8 - k) + vals
                self.sizelbl, _, _, self.header, self.body, self.footer, _ = vals
                if not (0 < self.body < size and 0 < self.header < size and 0 < self.footer < size
                        and 0 <= self.sizelbl < size):
                    raise FormatError(f"{path}: DUMPI index points outside the file (truncated)")
                self._read_header(fh)
                self._read_footer(fh)
                self.type_sizes = self._read_sizes(fh)
        except (EOFError, struct.error):
            raise FormatError(f"{path}: DUMPI index, header or footer cut short (truncated)") from None

    def _read_header(self, fh):
        fh.seek(self.header)
        self.version = tuple(fh.read(3))
        fh.read(8)
        n = struct.unpack(">H", fh.read(2))[0]
        self.hostname = fh.read(n).decode("utf-8", "replace") or None

    def _read_footer(self, fh):
        if _u64(fh, self.footer) != _FOOT_MAGIC:
            raise FormatError(f"{self.path}: DUMPI footer has a bad magic number (corrupt file)")
        raw = fh.read(4 * (_ALL + 1))
        if len(raw) < 4 * (_ALL + 1):
            raise EOFError
        self.call_count = struct.unpack(f">{_ALL + 1}I", raw)

    def _read_sizes(self, fh):
        if not self.sizelbl:
            return None
        fh.seek(self.sizelbl)
        n = struct.unpack(">i", fh.read(4))[0]
        return struct.unpack(f">{n}i", fh.read(4 * n))


def trace_files(path: str):
    """(meta file, [(rank, .bin file)]) from the .meta, a .bin or the directory."""
    if os.path.isdir(path):
        metas = sorted(glob.glob(os.path.join(path, "*.meta")))
        if not metas:
            raise FormatError(f"{path}: no DUMPI .meta file in this directory")
        if len(metas) > 1:
            raise FormatError(f"{path}: {len(metas)} DUMPI traces here; give one .meta file")
        path = metas[0]
    if path.endswith(".bin"):
        m = re.match(r"^(.*)-\d+\.bin$", path)
        if m is None:
            raise FormatError(f"{path}: a DUMPI .bin file is named PREFIX-NNNN.bin")
        path = m.group(1) + ".meta"
    meta = _read_meta(path)
    n = meta.get("numprocs")
    folder = os.path.dirname(path)
    prefix = meta.get("fileprefix") or os.path.basename(path)[:-5]
    if n is None or not n.isdigit():
        raise FormatError(f"{path}: no 'numprocs=N' line")
    out = []
    for r in range(int(n)):
        cands = glob.glob(os.path.join(glob.escape(folder), f"{glob.escape(prefix)}-*{r}.bin"))
        cands = [c for c in cands if re.fullmatch(r"0*" + str(r), c[len(os.path.join(folder, prefix)) + 1:-4])]
        if not cands:
            raise FormatError(f"{path}: numprocs={n} but there is no .bin file for rank {r}")
        out.append((r, cands[0]))
    return path, out


def _read_meta(path):
    meta = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for no, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                key, eq, value = line.strip().partition("=")
                if not eq:
                    raise FormatError(f"{path}:{no}: DUMPI meta lines are key=value")
                meta[key] = value
    except IsADirectoryError:
        raise FormatError(f"{path}: not a DUMPI .meta file") from None
    return meta


def is_dumpi(path: str) -> bool:
    if os.path.isdir(path):
        metas = glob.glob(os.path.join(path, "*.meta"))
        return len(metas) == 1 and _looks_like_meta(metas[0])
    if path.endswith(".meta"):
        return _looks_like_meta(path)
    if path.endswith(".bin"):
        try:
            with open(path, "rb") as fh:
                return fh.read(8) == _HEAD_MAGIC.to_bytes(8, "big")
        except OSError:
            return False
    return False


def _looks_like_meta(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(4096)
    except OSError:
        return False
    return "numprocs=" in text and "fileprefix=" in text


# ---------------------------------------------------------------- one rank
_SENDS = {"Send", "Bsend", "Ssend", "Rsend", "Isend", "Ibsend", "Issend", "Irsend"}
_INITS = {"Send_init", "Bsend_init", "Ssend_init", "Rsend_init"}
_CREATE = {"Comm_dup", "Comm_split", "Comm_create", "Cart_create", "Cart_sub", "Graph_create",
           "Intercomm_create", "Intercomm_merge"}
_RESOLVED = {"Comm_dup", "Comm_split", "Cart_create", "Comm_create"}
_RMA = {"Put": False, "Get": True, "Accumulate": False}
_USED = _SENDS | _INITS | _CREATE | set(_RMA) | {
    "Sendrecv", "Sendrecv_replace", "Start", "Startall", "Bcast", "Reduce", "Allreduce", "Scan",
    "Exscan", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall",
    "Alltoallv", "Alltoallw", "Reduce_scatter", "Win_create", "Comm_free", "Comm_group",
    "Group_incl", "Group_excl"}


class _Instance:
    """A communicator as one rank saw it: how it was made."""

    __slots__ = ("kind", "parent", "seq", "color", "key", "group", "where")

    def __init__(self, kind, parent=None, seq=0, color=0, key=0, group=None, where=""):
        self.kind, self.parent, self.seq = kind, parent, seq
        self.color, self.key, self.group, self.where = color, key, group, where


class _Rank:
    """Traffic of one rank in communicator-rank space, per comm instance."""

    def __init__(self, rank, model):
        self.rank, self.model = rank, model
        self.instances = [_Instance("world"), _Instance("self")]
        self.handle = {_COMM_WORLD: 0, _COMM_SELF: 1}
        self.created = {}  # instance -> creations made on it so far
        self.p2p = {}      # (instance, peer, kind) -> [bytes, messages]
        self.coll = {}     # (instance, op, root) -> [unit bytes summed, calls]
        self.exact = {}    # (instance, peer) -> [bytes, messages]
        self.requests = {}
        self.windows = {}
        self.groups = {}   # handle -> ("comm", instance) | ("incl"/"excl", group, ranks)

    def inst(self, handle, stream, fn):
        try:
            return self.handle[handle]
        except KeyError:
            raise FormatError(f"{stream.path}: record {stream.record}: {fn} on communicator "
                              f"handle {handle}, which no earlier record created") from None

    def send(self, inst, peer, nbytes, kind="p2p"):
        if peer < 0:
            return  # MPI_PROC_NULL
        e = self.p2p.setdefault((inst, peer, kind), [0.0, 0])
        e[0] += nbytes
        e[1] += 1


def _read_rank(st: _Rank, rf: _RankFile, bar) -> _Rank:
    st.path = rf.path
    sizes = rf.type_sizes or ()
    counts = [0] * (_ALL + 1)
    status_width = 14 if rf.version >= (0, 6, 3) else 10
    with open(rf.path, "rb") as fh:
        s = _Stream(fh, rf.path, rf.body, rf.header + 3)
        s.skip(8)  # cpu and wall time offsets
        last = s.offset
        fixed = {}  # (label, mask) -> (struct, names) of records without variable parts
        while True:
            s.record += 1
            if s.pos + 3 > len(s.buf):
                s.need(3)  # the end-of-stream label is followed by the header: 3 bytes exist
            label, mask = _LABEL_MASK.unpack_from(s.buf, s.pos)
            s.pos += 3
            if label == _END:
                break
            if label >= len(FUNCTIONS) or _SPECS[label] is None:
                raise FormatError(f"{rf.path}: record {s.record}: unknown function label {label} "
                                  "(corrupt file)")
            counts[label] += 1
            name = FUNCTIONS[label]
            plan = fixed.get((label, mask))
            if plan is None:
                plan = fixed[(label, mask)] = _fixed_layout(_SPECS[label], mask)
            if plan:
                layout, names = plan
                if s.pos + layout.size > len(s.buf):
                    s.need(layout.size)
                vals = layout.unpack_from(s.buf, s.pos)
                s.pos += layout.size
                if name in _USED:
                    _count(st, name, dict(zip(names, vals)), sizes, s)
            else:
                s.skip(_header_bytes(mask))
                if mask & _PERFINFO:
                    s.skip(16 * s.take(_FIXED["b"]))
                values = _fields(s, _SPECS[label], mask, status_width)
                if name in _USED:
                    _count(st, name, values, sizes, s)
            if not s.record & 0xFFFF:
                bar.update(s.offset - last)
                last = s.offset
        bar.update(s.offset - last)
    counts[_ALL] = sum(counts[:_ALL])  # the footer's total of all calls
    for label, n in enumerate(counts):
        if n != rf.call_count[label] and not (label == _ALL and rf.call_count[_ALL] == 0):
            raise FormatError(f"{rf.path}: the footer counts {rf.call_count[label]} "
                              f"{FUNCTIONS[label]} calls but the event stream holds {n} "
                              "(truncated or corrupt file)")
    st.counts = counts
    return st


def _header_bytes(mask) -> int:
    """Thread id and the cpu and wall start/stop times after the mask."""
    return (2 if mask & _THREADID else 0) + (12 if mask & _TIME_CPU else 0) \
        + (12 if mask & _TIME_WALL else 0)


def _fixed_layout(spec, mask):
    """One struct for a whole record (after label and mask) when it has
    no arrays, statuses, conditions or counters: most records of a trace."""
    if mask & _PERFINFO or any(code not in _FIXED or cond for code, _, cond in spec):
        return False
    fmt = ">" + f"{_header_bytes(mask)}x"
    for code, name, _ in spec:
        fmt += "h" if code == "h" and name in _SIGNED16 else _FIXED[code].format[1:]
    return struct.Struct(fmt), tuple(name for _, name, _ in spec)


def _fields(s: _Stream, spec, mask, status_width) -> dict:
    out = {}
    for code, name, cond in spec:
        if cond is not None and out.get(cond[0]) != out.get(cond[1]):
            continue
        if code in _FIXED:
            v = s.take(_FIXED[code])
            if code == "h" and name in _SIGNED16 and v >= 0x8000:
                v -= 0x10000
            out[name] = v
        elif code == "I":
            out[name] = s.array("i")
        elif code == "H":
            s.array(2)
        elif code == "B":
            s.array(1)
        elif code == "c":
            s.array(1)
        elif code == "C" or code == "A":
            n = out.get("argc", 0) if code == "A" else s.take(_FIXED["i"])
            for _ in range(max(n, 0)):
                s.array(1)
        elif code == "D":
            for _ in range(max(s.take(_FIXED["i"]), 0)):
                for _ in range(max(s.take(_FIXED["i"]), 0)):
                    s.array(1)
        elif code == "J":
            for _ in range(max(s.take(_FIXED["i"]), 0)):
                s.array(4)
        elif code == "s":
            if mask & _STATUSES:
                n = s.take(_FIXED["i"])
                s.skip(max(n, 0) * status_width)
        else:
            raise AssertionError(code)
    return out


def _size(sizes, dtype, s, fn):
    if 0 <= dtype < len(sizes):
        return sizes[dtype]
    raise FormatError(f"{s.path}: record {s.record}: {fn} uses datatype {dtype}, which the "
                      "trace's datatype size table does not list")


def _count(st: _Rank, fn: str, v: dict, sizes, s) -> None:
    if fn in _SENDS or fn == "Sendrecv_replace":
        st.send(st.inst(v["comm"], s, fn), v["dest"], v["count"] * _size(sizes, v["datatype"], s, fn))
    elif fn == "Sendrecv":
        st.send(st.inst(v["comm"], s, fn), v["dest"], v["sendcount"] * _size(sizes, v["sendtype"], s, fn))
    elif fn in _INITS:
        st.requests[v["request"]] = (st.inst(v["comm"], s, fn), v["dest"],
                                     v["count"] * _size(sizes, v["datatype"], s, fn))
    elif fn in ("Start", "Startall"):
        for req in (v["request"],) if fn == "Start" else v["requests"]:
            if req in st.requests:
                st.send(*st.requests[req])
    elif fn in _CREATE:
        parent = st.inst(v.get("oldcomm", v.get("comm", v.get("localcomm"))), s, fn)
        seq = st.created.get(parent, 0)
        st.created[parent] = seq + 1
        new = v["newcomm"]
        if new != _COMM_NULL:
            st.handle[new] = len(st.instances)
            st.instances.append(_Instance(fn, parent, seq, v.get("color", 0), v.get("key", 0),
                                          st.groups.get(v.get("group")),
                                          f"{s.path}: record {s.record}"))
    elif fn == "Comm_group":
        st.groups[v["group"]] = ("comm", st.inst(v["comm"], s, fn))
    elif fn in ("Group_incl", "Group_excl"):
        st.groups[v["newgroup"]] = (fn[6:], st.groups.get(v["group"]), tuple(v["ranks"]))
    elif fn == "Win_create":
        st.windows[v["win"]] = st.inst(v["comm"], s, fn)
    elif fn in _RMA:
        inst = st.windows.get(v["win"])
        if inst is None:
            raise FormatError(f"{s.path}: record {s.record}: {fn} on a window no Win_create made")
        nbytes = v["origincount"] * _size(sizes, v["origintype"], s, fn)
        st.send(inst, v["targetrank"], nbytes, "rma_get" if _RMA[fn] else "rma")
    elif fn == "Comm_free":
        st.handle.pop(v["comm"], None)
    else:
        _collective(st, fn, v, sizes, s)


def _collective(st, fn, v, sizes, s):
    inst = st.inst(v["comm"], s, fn)

    def unit(op, nbytes, root=0):
        e = st.coll.setdefault((inst, op, root), [0.0, 0])
        e[0] += nbytes
        e[1] += 1

    def exact(counts, dtype):
        size = _size(sizes, dtype, s, fn)
        for q, c in enumerate(counts):
            if c:
                e = st.exact.setdefault((inst, q), [0.0, 0])
                e[0] += c * size
                e[1] += 1

    if fn == "Bcast":
        unit("bcast", v["count"] * _size(sizes, v["datatype"], s, fn), v["root"])
    elif fn == "Reduce":
        unit("reduce", v["count"] * _size(sizes, v["datatype"], s, fn), v["root"])
    elif fn in ("Allreduce", "Scan", "Exscan"):
        unit("allreduce" if fn == "Allreduce" else "scan", v["count"] * _size(sizes, v["datatype"], s, fn))
    elif fn in ("Gather", "Gatherv"):
        unit("gather", v["sendcount"] * _size(sizes, v["sendtype"], s, fn), v["root"])
    elif fn == "Scatter":
        unit("scatter", v["recvcount"] * _size(sizes, v["recvtype"], s, fn), v["root"])
    elif fn == "Scatterv":
        if v["commrank"] == v["root"]:
            size = _size(sizes, v["sendtype"], s, fn)
            if st.model == "root":
                exact(v["sendcounts"], v["sendtype"])
            else:
                unit("scatter", sum(v["sendcounts"]) * size / max(len(v["sendcounts"]), 1), v["root"])
        else:
            unit("scatter", v["recvcount"] * _size(sizes, v["recvtype"], s, fn), v["root"])
    elif fn in ("Allgather", "Allgatherv"):
        unit("allgather", v["sendcount"] * _size(sizes, v["sendtype"], s, fn))
    elif fn == "Alltoall":
        unit("alltoall", v["sendcount"] * _size(sizes, v["sendtype"], s, fn))
    elif fn == "Alltoallv":
        exact(v["sendcounts"], v["sendtype"])
    elif fn == "Alltoallw":
        raise FormatError(f"{s.path}: record {s.record}: Alltoallw (one datatype per peer) is "
                          "not read from DUMPI traces")
    elif fn == "Reduce_scatter":
        counts = v["recvcounts"]
        unit("reduce_scatter", sum(counts) * _size(sizes, v["datatype"], s, fn) / max(len(counts), 1))


# ------------------------------------------------------------- whole trace
def read_dumpi(path: str, collectives: str = "tree") -> Trace:
    meta, files = trace_files(path)
    rfs = [_RankFile(f) for _, f in files]
    total = sum(rf.header - rf.body for rf in rfs)
    with Progress(total, "reading DUMPI") as bar:
        ranks = [_read_rank(_Rank(r, collectives), rf, bar) for (r, _), rf in zip(files, rfs)]
    table = PairTable()
    _Resolver(ranks).into(table, collectives)
    return table.to_trace(len(files), [rf.hostname for rf in rfs], meta, "SST DUMPI", collectives)


class _Resolver:
    """World ranks of every rank's communicator instances."""

    def __init__(self, ranks):
        self.ranks = ranks
        self._gkey = {}
        self._members = {}
        self.by_key = {}
        for st in ranks:
            for i in range(len(st.instances)):
                self.by_key.setdefault(self.gkey(st.rank, i), []).append((st.rank, i))

    def gkey(self, r, i):
        k = self._gkey.get((r, i))
        if k is None:
            inst = self.ranks[r].instances[i]
            if inst.kind == "world":
                k = ("world",)
            elif inst.kind == "self":
                k = ("self", r)
            else:
                color = inst.color if inst.kind == "Comm_split" else 0
                k = (self.gkey(r, inst.parent), inst.seq, inst.kind, color)
            self._gkey[(r, i)] = k
        return k

    def members(self, r, i):
        """World ranks in comm-rank order, or the creating record when the
        trace cannot say."""
        k = self.gkey(r, i)
        if k in self._members:
            return self._members[k]
        inst = self.ranks[r].instances[i]
        if inst.kind == "world":
            out = tuple(range(len(self.ranks)))
        elif inst.kind == "self":
            out = (r,)
        elif inst.kind not in _RESOLVED or (inst.kind == "Comm_create" and inst.group is None):
            out = inst.where + f": {inst.kind}"
        elif inst.kind == "Comm_create":
            out = self._group(r, inst.group, inst.where)
        else:
            order = []
            for q, j in self.by_key[k]:
                parent = self.members(q, self.ranks[q].instances[j].parent)
                if isinstance(parent, str):
                    out = parent
                    break
                key = self.ranks[q].instances[j].key if inst.kind == "Comm_split" else 0
                order.append((key, parent.index(q), q))
            else:
                out = tuple(q for _, _, q in sorted(order))
        self._members[k] = out
        return out

    def _group(self, r, desc, where):
        """World ranks of a group a rank built from its communicators."""
        if desc is None:
            return where + ": a group built by calls this reader does not follow"
        if desc[0] == "comm":
            return self.members(r, desc[1])
        parent = self._group(r, desc[1], where)
        if isinstance(parent, str):
            return parent
        if desc[0] == "incl":
            return tuple(parent[i] for i in desc[2])
        drop = set(desc[2])
        return tuple(x for j, x in enumerate(parent) if j not in drop)

    def _world(self, r, i):
        m = self.members(r, i)
        if isinstance(m, str):
            raise FormatError(f"{m} makes a communicator whose members the trace does not record; "
                              "traffic on it cannot be placed on world ranks")
        return m

    def into(self, table, model):
        for st in self.ranks:
            r = st.rank
            for (i, peer, kind), (b, m) in st.p2p.items():
                world = self._world(r, i)
                if peer >= len(world):
                    raise FormatError(f"{st.path}: sends to rank {peer} of a communicator of "
                                      f"{len(world)} ranks (corrupt file?)")
                src, dst = (world[peer], r) if kind == "rma_get" else (r, world[peer])
                table.add("p2p" if kind == "p2p" else "rma", src, dst, b, m)
            if model == "none":
                continue
            for (i, op, root), (b, calls) in st.coll.items():
                world = self._world(r, i)
                me = world.index(r)
                for q, f, m in collective_plan(model, op, me, len(world), root, b / max(calls, 1)):
                    table.add("collective", r, world[q], f * b, m * calls)
            for (i, q), (b, m) in st.exact.items():
                world = self._world(r, i)
                if world[q] != r:
                    table.add("collective", r, world[q], b, m)
