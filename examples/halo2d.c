/* A 2-D halo exchange: the ranks form a periodic grid (MPI_Dims_create,
 * MPI_Cart_create), each holds an N x N block of doubles and swaps its edges
 * with its 4 neighbours every iteration, then averages.  A compiled program
 * to record, map and relaunch (README):
 *
 *     mpicc -O2 -o halo2d examples/halo2d.c
 *     mpiexec -n 16 python -m rankmap.profile -o halo2d.rmtrace.npz ./halo2d 200
 *
 * Arguments: iterations (default 100), N (default 256). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 100, n = argc > 2 ? atoi(argv[2]) : 256;
    int size, me, dims[2] = {0, 0}, periods[2] = {1, 1}, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Comm grid;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    MPI_Comm_rank(grid, &me);
    double *a = calloc((size_t)(n + 2) * (n + 2), sizeof *a), *b = calloc((size_t)(n + 2) * (n + 2), sizeof *b);
    MPI_Datatype column;   /* one column of the block: n doubles, a row apart */
    MPI_Type_vector(n, 1, n + 2, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
#define AT(i, j) ((size_t)(i) * (n + 2) + (j))
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        int up, down, left, right;
        MPI_Cart_shift(grid, 0, 1, &up, &down);
        MPI_Cart_shift(grid, 1, 1, &left, &right);
        MPI_Sendrecv(&a[AT(1, 1)], n, MPI_DOUBLE, up, 0, &a[AT(n + 1, 1)], n, MPI_DOUBLE, down, 0, grid, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&a[AT(n, 1)], n, MPI_DOUBLE, down, 1, &a[AT(0, 1)], n, MPI_DOUBLE, up, 1, grid, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&a[AT(1, 1)], 1, column, left, 2, &a[AT(1, n + 1)], 1, column, right, 2, grid, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&a[AT(1, n)], 1, column, right, 3, &a[AT(1, 0)], 1, column, left, 3, grid, MPI_STATUS_IGNORE);
        for (int i = 1; i <= n; i++)
            for (int j = 1; j <= n; j++)
                b[AT(i, j)] = 0.25 * (a[AT(i - 1, j)] + a[AT(i + 1, j)] + a[AT(i, j - 1)] + a[AT(i, j + 1)]) + me;
        double *t = a; a = b; b = t;
    }
    double seconds = MPI_Wtime() - t0;
    MPI_Get_processor_name(host, &len);
    printf("halo2d: rank %d of %d on %s: %d iterations of %dx%d in %.3f s\n", me, size, host, iters, n, n, seconds);
    MPI_Type_free(&column);
    MPI_Comm_free(&grid);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
