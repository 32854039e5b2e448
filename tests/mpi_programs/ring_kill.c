/* Every rank sends 10 x 1000 B around a ring, waits 3 flush intervals (so
 * each rank's part holds it), sends 10 x 1000 B more, then rank ARGV[1]
 * SIGKILLs itself; the launcher kills the others.  ARGV[2]: the interval. */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static void ring(int times, int me, int n) {
    static char buf[1000], got[1000];
    for (int i = 0; i < times; i++)
        MPI_Sendrecv(buf, 1000, MPI_BYTE, (me + 1) % n, 0, got, 1000, MPI_BYTE, (me + n - 1) % n, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv) {
    int me, n, victim = atoi(argv[1]);
    double interval = atof(argv[2]);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ring(10, me, n);
    usleep((useconds_t)(3e6 * interval));
    ring(10, me, n);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == victim) raise(SIGKILL);
    sleep(60);   /* killed by the launcher long before */
    MPI_Finalize();
    return 0;
}
