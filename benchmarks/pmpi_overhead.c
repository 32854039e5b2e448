/* Per-call cost of MPI calls, for benchmarks/pmpi_overhead.py: run plain and
 * under `python -m rankmap.profile`, the difference is what the interposition
 * library adds per intercepted call.
 *
 * One rank: each case is a short loop of calls to itself (or on
 * MPI_COMM_SELF), timed in CPU time of the calling thread (on a loaded
 * machine wall time mostly measures waiting for a core); the best of
 * REPEATS rounds, the cases interleaved so that a busy moment hits them
 * alike.  Two ranks: a ping-pong of 8 bytes, wall time per round trip (two
 * intercepted sends on its critical path).  Prints "case<TAB>us per call".
 *
 * Arguments: calls per round (default 20000), rounds (default 15). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double s8, r8, v8[8], w8[8];
static MPI_Request req, pers;
static MPI_Comm self_comm;

static void isend_recv(void) {   /* one intercepted send */
    MPI_Isend(&s8, 1, MPI_DOUBLE, 0, 1, self_comm, &req);
    MPI_Recv(&r8, 1, MPI_DOUBLE, 0, 1, self_comm, MPI_STATUS_IGNORE);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
}
static void sendrecv(void) { MPI_Sendrecv(&s8, 1, MPI_DOUBLE, 0, 2, &r8, 1, MPI_DOUBLE, 0, 2, self_comm, MPI_STATUS_IGNORE); }
static void proc_null(void) { MPI_Send(&s8, 1, MPI_DOUBLE, MPI_PROC_NULL, 3, self_comm); }
static void start(void) {   /* a persistent send's Start */
    MPI_Start(&pers);
    MPI_Recv(&r8, 1, MPI_DOUBLE, 0, 4, self_comm, MPI_STATUS_IGNORE);
    MPI_Wait(&pers, MPI_STATUS_IGNORE);
}
static void allreduce(void) { MPI_Allreduce(MPI_IN_PLACE, v8, 8, MPI_DOUBLE, MPI_SUM, self_comm); }
static void bcast(void) { MPI_Bcast(v8, 8, MPI_DOUBLE, 0, self_comm); }
static void alltoall(void) { MPI_Alltoall(v8, 8, MPI_DOUBLE, w8, 8, MPI_DOUBLE, self_comm); }

int main(int argc, char **argv) {
    int calls = argc > 1 ? atoi(argv[1]) : 20000, rounds = argc > 2 ? atoi(argv[2]) : 15, me, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n == 1) {
        static const struct { const char *name; void (*call)(void); } cases[] = {
            {"Isend 8 B to itself (+Recv, Wait)", isend_recv}, {"Sendrecv 8 B to itself", sendrecv},
            {"Send to MPI_PROC_NULL", proc_null}, {"Start of a persistent send (+Recv, Wait)", start},
            {"Allreduce 64 B (COMM_SELF)", allreduce}, {"Bcast 64 B (COMM_SELF)", bcast},
            {"Alltoall 64 B (COMM_SELF)", alltoall}};
        enum { NCASES = sizeof cases / sizeof *cases };
        double best[NCASES];
        MPI_Comm_dup(MPI_COMM_SELF, &self_comm);
        MPI_Send_init(&s8, 1, MPI_DOUBLE, 0, 4, self_comm, &pers);
        for (int c = 0; c < NCASES; c++) best[c] = 1e30;
        for (int r = 0; r < rounds; r++)
            for (int c = 0; c < NCASES; c++) {
                double t0 = cpu_now();
                for (int i = 0; i < calls; i++) cases[c].call();
                double t = (cpu_now() - t0) / calls;
                if (t < best[c]) best[c] = t;
            }
        for (int c = 0; c < NCASES; c++) printf("%s\t%.4f\n", cases[c].name, 1e6 * best[c]);
        MPI_Request_free(&pers);
        MPI_Comm_free(&self_comm);
    } else if (me < 2) {   /* ping-pong between ranks 0 and 1 */
        double best = 1e30, x = 0;
        int other = 1 - me, iters = calls / 10 > 0 ? calls / 10 : 1;
        for (int r = 0; r < rounds; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                if (me == 0) {
                    MPI_Send(&x, 1, MPI_DOUBLE, other, 0, MPI_COMM_WORLD);
                    MPI_Recv(&x, 1, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(&x, 1, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(&x, 1, MPI_DOUBLE, other, 0, MPI_COMM_WORLD);
                }
            }
            double t = (MPI_Wtime() - t0) / iters;
            if (t < best) best = t;
        }
        if (me == 0) printf("ping-pong 8 B round trip (2 ranks, wall)\t%.4f\n", 1e6 * best);
    } else {
        for (int r = 0; r < rounds; r++) MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
