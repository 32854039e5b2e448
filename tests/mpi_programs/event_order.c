/* A program whose message order is known, for the event log of a compiled
 * program: tests/mpi_scripts/event_order.py is its mpi4py twin, call for
 * call, and tests/test_profile_native.py checks that both log the same
 * events on every rank.  An even number of ranks (`across` pairs them):
 * a ring pipeline (Irecv, Isend, Waitall), a blocking chain, a halo on a
 * Cartesian grid (non-periodic rows: MPI_PROC_NULL at its edges) with
 * Waitall and ignored statuses, Sendrecv, receives from MPI_ANY_SOURCE
 * (nonblocking, shorter than the buffer, its status ignored; blocking;
 * in a Waitsome with the program's statuses; in a Testany), persistent
 * requests, Waitany and Waitsome whose completion order is forced, Test
 * and Testall, a buffered send, Isendrecv (MPI-4), a paused stretch, and
 * collectives: on a split communicator, COMM_WORLD, the grid's
 * neighbourhood, an intercommunicator, and a nonblocking one. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static char in[4096], out[4096], bsend_space[1 << 16];

int main(int argc, char **argv) {
    int me, n, dims[2] = {0, 0}, periods[2] = {0, 1}, flag = 0, index, outcount, indices[2];
    MPI_Request r[8], p[2];
    MPI_Status statuses[2];
    MPI_Comm grid, sub, inter;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n % 2) {
        fprintf(stderr, "event_order: an even number of ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int right = (me + 1) % n, left = (me + n - 1) % n, across = (me + n / 2) % n;

    for (int it = 0; it < 3; it++) {   /* ring pipeline */
        MPI_Irecv(in, 80, MPI_BYTE, left, 1, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(out, 80, MPI_BYTE, right, 1, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
    if (me > 0) MPI_Recv(in, 3, MPI_DOUBLE, me - 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);   /* chain */
    if (me < n - 1) MPI_Send(out, 3, MPI_DOUBLE, me + 1, 2, MPI_COMM_WORLD);

    MPI_Dims_create(n, 2, dims);   /* halo */
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    for (int d = 0, k = 0; d < 2; d++) {
        int lo, hi;
        MPI_Cart_shift(grid, d, 1, &lo, &hi);
        MPI_Irecv(in, 48, MPI_BYTE, lo, 3, grid, &r[k++]);
        MPI_Irecv(in + 48, 48, MPI_BYTE, hi, 3, grid, &r[k++]);
        MPI_Isend(out, 48, MPI_BYTE, hi, 3, grid, &r[k++]);
        MPI_Isend(out + 48, 48, MPI_BYTE, lo, 3, grid, &r[k++]);
    }
    MPI_Waitall(8, r, MPI_STATUSES_IGNORE);

    MPI_Sendrecv(out, 16, MPI_BYTE, left, 4, in, 16, MPI_BYTE, right, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    MPI_Irecv(in, 40, MPI_BYTE, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &r[0]);   /* only `across` sends tag 5 */
    MPI_Send(out, 32, MPI_BYTE, across, 5, MPI_COMM_WORLD);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    if (me % 2 == 0) MPI_Recv(in, 8, MPI_BYTE, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else MPI_Send(out, 8, MPI_BYTE, me - 1, 6, MPI_COMM_WORLD);

    MPI_Send_init(out, 8, MPI_BYTE, right, 7, MPI_COMM_WORLD, &p[0]);   /* persistent */
    MPI_Recv_init(in, 8, MPI_BYTE, left, 7, MPI_COMM_WORLD, &p[1]);
    for (int it = 0; it < 2; it++) {
        MPI_Request both[2] = {p[1], p[0]};
        MPI_Startall(2, both);
        MPI_Waitall(2, p, MPI_STATUSES_IGNORE);
    }
    MPI_Request_free(&p[0]);
    MPI_Request_free(&p[1]);

    /* Waitany, then Waitsome (the program's statuses, an ANY_SOURCE receive):
     * the right neighbour sends tag 9 only once it has this rank's "go"
     * (tag 10), sent after the first completion, so that comes first */
    MPI_Irecv(in, 16, MPI_BYTE, right, 9, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(in + 16, 24, MPI_BYTE, left, 8, MPI_COMM_WORLD, &r[1]);
    MPI_Send(out, 8, MPI_BYTE, right, 8, MPI_COMM_WORLD);
    MPI_Waitany(2, r, &index, MPI_STATUS_IGNORE);
    MPI_Send(out, 1, MPI_BYTE, right, 10, MPI_COMM_WORLD);
    MPI_Recv(in, 1, MPI_BYTE, left, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(out, 16, MPI_BYTE, left, 9, MPI_COMM_WORLD);
    MPI_Waitany(2, r, &index, MPI_STATUS_IGNORE);
    MPI_Irecv(in, 16, MPI_BYTE, right, 12, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(in + 16, 24, MPI_BYTE, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &r[1]);
    MPI_Send(out, 8, MPI_BYTE, right, 11, MPI_COMM_WORLD);
    MPI_Waitsome(2, r, &outcount, indices, statuses);
    MPI_Send(out, 1, MPI_BYTE, right, 13, MPI_COMM_WORLD);
    MPI_Recv(in, 1, MPI_BYTE, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(out, 16, MPI_BYTE, left, 12, MPI_COMM_WORLD);
    MPI_Waitsome(2, r, &outcount, indices, statuses);

    MPI_Irecv(in, 8, MPI_BYTE, left, 14, MPI_COMM_WORLD, &r[0]);   /* Test, Testall, Testany */
    MPI_Send(out, 8, MPI_BYTE, right, 14, MPI_COMM_WORLD);
    for (flag = 0; !flag;) MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
    MPI_Isend(out, 8, MPI_BYTE, right, 15, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(in, 8, MPI_BYTE, left, 15, MPI_COMM_WORLD, &r[1]);
    for (flag = 0; !flag;) MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
    MPI_Irecv(in, 40, MPI_BYTE, MPI_ANY_SOURCE, 16, MPI_COMM_WORLD, &r[0]);
    MPI_Send(out, 24, MPI_BYTE, across, 16, MPI_COMM_WORLD);
    for (flag = 0; !flag;) MPI_Testany(1, r, &index, &flag, MPI_STATUS_IGNORE);

    MPI_Buffer_attach(bsend_space, sizeof bsend_space);   /* buffered: completes locally */
    MPI_Bsend(out, 8, MPI_BYTE, right, 17, MPI_COMM_WORLD);
    MPI_Recv(in, 8, MPI_BYTE, left, 17, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    void *space;
    int space_size;
    MPI_Buffer_detach(&space, &space_size);
#if MPI_VERSION >= 4
    MPI_Isendrecv(out, 16, MPI_BYTE, right, 18, in, 16, MPI_BYTE, left, 18, MPI_COMM_WORLD, &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
#endif

    MPI_Pcontrol(0);   /* paused: nothing logged */
    MPI_Sendrecv(out, 1000, MPI_BYTE, right, 19, in, 1000, MPI_BYTE, left, 19, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Pcontrol(1);

    double v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, w[64];
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &sub);
    MPI_Allreduce(v, w, 1, MPI_DOUBLE, MPI_SUM, sub);
    MPI_Barrier(sub);
    MPI_Bcast(out, 64, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Reduce(v, w, 2, MPI_DOUBLE, MPI_SUM, 1, MPI_COMM_WORLD);
    MPI_Allgather(v, 1, MPI_DOUBLE, w, 1, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Scatter(w, 1, MPI_DOUBLE, v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(v, 1, MPI_DOUBLE, w, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int *counts = malloc(4 * (size_t)n * sizeof(int)), *sd = counts + n, *rc = counts + 2 * n, *rd = counts + 3 * n;
    for (int q = 0; q < n; q++) {
        counts[q] = (me + q) % 3;
        rc[q] = (q + me) % 3;
        sd[q] = rd[q] = 3 * q;
    }
    double *a = calloc(3 * (size_t)n, sizeof(double)), *b = calloc(3 * (size_t)n, sizeof(double));
    MPI_Alltoallv(a, counts, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Neighbor_alltoall(v, 1, MPI_DOUBLE, w, 1, MPI_DOUBLE, grid);
    MPI_Intercomm_create(sub, 0, MPI_COMM_WORLD, me % 2 ? 0 : 1, 20, &inter);
    int sub_rank;
    MPI_Comm_rank(sub, &sub_rank);
    MPI_Bcast(out, 24, MPI_BYTE, me % 2 ? 0 : sub_rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
    MPI_Iallreduce(v, w, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);

    free(a);
    free(b);
    free(counts);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&sub);
    MPI_Comm_free(&grid);
    printf("event_order: rank %d: ok\n", me);
    MPI_Finalize();
    return 0;
}
