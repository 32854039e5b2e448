/* Each rank prints where it runs and whom MPI takes for its node:
 *   PLACE <rank> <host> <cpus, comma separated> <MPI_COMM_TYPE_SHARED size>
 * (one write per rank, so lines of different ranks never mix). */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, shared;
    MPI_Comm node;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &shared);
    char host[256] = "", line[4096];
    gethostname(host, sizeof host - 1);
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    int len = snprintf(line, sizeof line, "PLACE %d %s ", rank, host);
    const char *sep = "";
    for (int c = 0; c < CPU_SETSIZE && len < (int) sizeof line - 16; c++)
        if (CPU_ISSET(c, &set)) {
            len += snprintf(line + len, sizeof line - len, "%s%d", sep, c);
            sep = ",";
        }
    snprintf(line + len, sizeof line - len, " %d\n", shared);
    fputs(line, stdout);
    fflush(stdout);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
