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
 * at each MPI_Start.
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

/* the library's life: after MPI_Init; the end comes from MPI_Finalize */
void rm_begin(void);
void rm_pcontrol(int level);
int rm_fortran_in_place(const void *buf);
void *rm_fortran_next(const char *symbol);

/* point-to-point; persistent requests */
void rm_p2p(MPI_Comm comm, int dest, MPI_Count count, MPI_Datatype type, MPI_Request *persist);
void rm_start(rm_handles requests, int count);
void rm_forget(MPI_Request request);

/* collectives with a model (the operations of rankmap/profile/collectives.py);
 * rm_vector: one vector of `count` items (bcast, reduce, allreduce, scan,
 * exscan, reduce_scatter_block's block) */
enum rm_op { RM_BCAST, RM_REDUCE, RM_SCATTER, RM_GATHER, RM_ALLGATHER, RM_ALLREDUCE,
             RM_ALLTOALL, RM_REDUCE_SCATTER, RM_SCAN, RM_NOPS };
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
