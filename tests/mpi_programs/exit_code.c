/* Each rank sends 24 B to the next, then ends with exit code ARGV[1]; with
 * "wait", rank 0 prints "waiting PID" (its parent: under the profiler, its
 * supervisor) and every rank sleeps until a signal ends it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int me, n;
    double out[3] = {1, 2, 3}, in[3];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Sendrecv(out, 3, MPI_DOUBLE, (me + 1) % n, 0, in, 3, MPI_DOUBLE, (me + n - 1) % n, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (argc > 1 && !strcmp(argv[1], "wait")) {
        if (me == 0) printf("waiting %d\n", (int)getppid());
        fflush(stdout);
        sleep(60);
    }
    MPI_Finalize();
    return argc > 1 ? atoi(argv[1]) : 0;
}
