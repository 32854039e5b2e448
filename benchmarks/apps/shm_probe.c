/* Where did each rank run, and which ranks does the MPI treat as sharing
 * memory with it?  Run with an application's exact launch line before the
 * application: rank 0 prints one line
 *   SHM_PROBE [[host, shared_size, "cpus"], ...]   (one entry per rank)
 * where shared_size is the size of MPI_COMM_TYPE_SHARED at that rank and
 * cpus the CPUs it may run on.  A rank whose shared size is not the number
 * of ranks on its host talks to its own host's ranks through the network
 * stack (the MPI took one host for several). */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_LEN 64
#define CPUS_LEN 192

typedef struct {
    char host[HOST_LEN];
    char cpus[CPUS_LEN];
    int shared;
} where_t;

static void cpu_list(char *out, size_t len) {
    cpu_set_t set;
    size_t used = 0;
    out[0] = '\0';
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    for (int c = 0; c < CPU_SETSIZE && used + 8 < len; c++)
        if (CPU_ISSET(c, &set)) used += (size_t)snprintf(out + used, len - used, used ? ",%d" : "%d", c);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Comm shared;
    where_t me;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
    memset(&me, 0, sizeof me);
    MPI_Comm_size(shared, &me.shared);
    gethostname(me.host, HOST_LEN - 1);
    cpu_list(me.cpus, CPUS_LEN);
    where_t *all = rank == 0 ? malloc(sizeof(where_t) * (size_t)size) : NULL;
    MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("SHM_PROBE [");
        for (int r = 0; r < size; r++)
            printf("%s[\"%s\", %d, \"%s\"]", r ? ", " : "", all[r].host, all[r].shared, all[r].cpus);
        printf("]\n");
        fflush(stdout);
        free(all);
    }
    MPI_Comm_free(&shared);
    MPI_Finalize();
    return 0;
}
