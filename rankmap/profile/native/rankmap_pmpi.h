/* rankmap's PMPI interposition library: what the generated wrappers call.
 *
 * Every wrapper (C, and Fortran in its four manglings) runs the real call
 * through the profiling interface, then, when the call succeeded and the
 * calling thread is not inside another wrapper (rm_on), calls one rm_*
 * function below with the call's own arguments.  Those functions count
 * bytes per COMM_WORLD peer, or, for collectives with a model, one event
 * (group, operation, root, unit bytes) that rankmap's Python side spreads
 * over pairs with the same models as the mpi4py profiler
 * (rankmap/profile/collectives.py).  `persist` is NULL for a call that
 * sends now, or the request of a persistent call, whose sends are counted
 * at each MPI_Start.  The same functions log the call in the event log
 * (posts, collectives); the completion calls (Wait, Test and their
 * all/any/some forms) claim the requests they name before the call (rm_claim)
 * and log the waits of those that completed after it (rm_done).
 */
#ifndef RANKMAP_PMPI_H
#define RANKMAP_PMPI_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* inside a wrapper: MPI calls made by the MPI library itself (MPICH's
 * Fortran bindings call the C MPI_ functions) are not counted twice */
extern __thread int rm_depth __attribute__((tls_model("initial-exec")));
extern volatile int rm_recording;
#define rm_on() (rm_recording && rm_depth == 0)

/* an array of counts: int (C int, Fortran MPI_Fint) or MPI_Count (large-count
 * calls); `step` 0: one count for every peer (RM_ONE_COUNT) */
typedef struct { const void *p; int wide, step; } rm_counts;
#define RM_COUNTS(x) ((rm_counts){(const void *)(x), sizeof(*(x)) == sizeof(MPI_Count), 1})
#define RM_ONE_COUNT(x) ((rm_counts){(const void *)&(x), sizeof(x) == sizeof(MPI_Count), 0})
/* an array of handles: C handles, or Fortran integers (converted on use);
 * `step` 0: one C handle for every peer (RM_ONE) */
typedef struct { const void *p; int fortran, step; } rm_handles;
#define RM_ONE(x) ((rm_handles){(const void *)&(x), 0, 0})
/* a status argument of the wrapper (`slot`: the argument itself, C statuses
 * or Fortran integers), which the library points at statuses of its own
 * when the program ignores them and a receive's source must be learnt */
typedef struct { void **slot; int fortran; } rm_status;
#define RM_NO_STATUS ((rm_status){NULL, 0})
/* a request the call made: its C handle and where the program keeps it (the
 * wrapper's argument: a completion call naming the same variable is taken to
 * complete this request first, should several share one handle, as MPIs give
 * requests that complete at once) */
typedef struct { MPI_Request *handle; const void *slot; } rm_req;
#define RM_NO_REQ ((rm_req){NULL, NULL})

/* the library's life: after MPI_Init; the end comes from MPI_Finalize */
void rm_begin(void);
void rm_pcontrol(int level);
int rm_fortran_in_place(const void *buf);
void *rm_fortran_next(const char *symbol);

/* point-to-point: how a post completes in the event log: a wait follows it
 * (blocking), none (buffered: it completes locally), the wait of its request
 * (nonblocking: `request`), or it is posted at each MPI_Start (persistent) */
enum rm_mode { RM_BLOCKING, RM_BUFFERED, RM_NONBLOCKING, RM_PERSISTENT };
void rm_p2p(MPI_Comm comm, int dest, MPI_Count count, MPI_Datatype type, int mode, rm_req request);
/* receives (`st`: a blocking one's status, which rm_want_status, called
 * before it, may have pointed at the library's own) */
void rm_want_status(int source, rm_status st);
void rm_recv(MPI_Comm comm, int source, MPI_Count count, MPI_Datatype type, int mode, rm_req request,
             rm_status st);
/* Sendrecv (no request, `st` its status) and Isendrecv (`request`) */
void rm_sendrecv(MPI_Comm comm, int dest, MPI_Count scount, MPI_Datatype stype, int source, MPI_Count rcount,
                 MPI_Datatype rtype, rm_req request, rm_status st);
/* a request the log waits for nothing of (a nonblocking collective's) */
void rm_untracked(rm_req request);
void rm_start(rm_handles requests, int count);
void rm_forget(rm_handles request);
/* completion: the requests a call may complete (before it), then those that
 * did: `n` of them, request `which[j] - base` (which NULL: requests 0..n-1),
 * whose status is the j-th of `st` */
void rm_claim(rm_handles requests, int count, rm_status st);
void rm_done(int n, const int *which, int base, rm_status st);

/* collectives with a model (the operations of rankmap/profile/collectives.py);
 * rm_vector: one vector of `count` items (bcast, reduce, allreduce, scan,
 * exscan, reduce_scatter_block's block; a barrier's: none) */
enum rm_op { RM_BCAST, RM_REDUCE, RM_SCATTER, RM_GATHER, RM_ALLGATHER, RM_ALLREDUCE,
             RM_ALLTOALL, RM_REDUCE_SCATTER, RM_SCAN, RM_BARRIER, RM_NOPS };
void rm_vector(MPI_Comm comm, int op, MPI_Count count, MPI_Datatype type, int root,
               MPI_Request *persist);
/* gather, scatter: the unit is `root_count` items at the root, `count` elsewhere */
void rm_rooted(MPI_Comm comm, int op, int root, MPI_Count root_count, MPI_Datatype root_type,
               MPI_Count count, MPI_Datatype type, MPI_Request *persist);
void rm_scatterv(MPI_Comm comm, rm_counts scounts, MPI_Datatype stype, MPI_Count rcount,
                 MPI_Datatype rtype, int root, MPI_Request *persist);
/* allgather(v): the own block (Allgather: RM_ONE_COUNT) */
void rm_allgatherv(MPI_Comm comm, MPI_Count scount, MPI_Datatype stype, rm_counts rcounts,
                   MPI_Datatype rtype, MPI_Request *persist);
void rm_reduce_scatter(MPI_Comm comm, rm_counts rcounts, MPI_Datatype type, MPI_Request *persist);
/* exact: alltoall(v/w) send block q to rank q (Alltoall, Alltoallv: RM_ONE_COUNT, RM_ONE) */
void rm_alltoallw(MPI_Comm comm, int in_place, rm_counts scounts, rm_handles stypes,
                  rm_counts rcounts, rm_handles rtypes, MPI_Request *persist);
/* exact: neighbourhood collectives name their peers */
void rm_neighbors(MPI_Comm comm, rm_counts scounts, rm_handles stypes, MPI_Request *persist);

/* one-sided: bytes put to the target, bytes fetched from it */
void rm_rma(MPI_Win win, int target, MPI_Count put_count, MPI_Datatype put_type,
            MPI_Count get_count, MPI_Datatype get_type);

#endif
