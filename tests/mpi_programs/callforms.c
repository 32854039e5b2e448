/* Every call form the interposition library records, each in its own phase
 * (MPI_Pcontrol(k) records into "pcontrol-k") with a byte count no other
 * form uses.  Run under `python -m rankmap.profile --collectives root` on
 * 2 or more ranks.  Each rank writes what it must have been recorded with
 * to ARGV[1].RANK, one row per line: phase kind src dst bytes messages.
 * MPI-4 forms (partitioned, persistent collectives, Isendrecv, large count)
 * run where the MPI has them, two threads sending at once where it gives
 * MPI_THREAD_MULTIPLE; the rows say which ran. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int me, n, right, left, phase;
static FILE *out;
static char sbuf[1 << 16], rbuf[1 << 16], bsend_space[1 << 16];
static MPI_Request rq[8];
static MPI_Comm world = MPI_COMM_WORLD;

static void row(const char *kind, int src, int dst, double bytes, int msgs) {
    if (src != dst && bytes != 0)
        fprintf(out, "pcontrol-%d %s %d %d %.17g %d\n", phase, kind, src, dst, bytes, msgs);
}

static void sent(const char *kind, int dst, double bytes, int msgs) { row(kind, me, dst, bytes, msgs); }

static void begin(int k) { phase = k; MPI_Pcontrol(k); }   /* from "main" */
static void end(void) { MPI_Pcontrol(1); }                 /* back to "main" */

/* post the receive from the left, so that a ready send to the right is legal */
static void post(int count, MPI_Datatype type) {
    MPI_Irecv(rbuf, count, type, left, phase, world, &rq[0]);
    MPI_Barrier(world);
}

static void done(void) { MPI_Wait(&rq[0], MPI_STATUS_IGNORE); }

/* a thread's ring exchange on its own communicator: 100 messages of `bytes` */
struct ring { MPI_Comm comm; int bytes; char in[128], out[128]; };
static void *thread_ring(void *arg) {
    struct ring *t = arg;
    for (int i = 0; i < 100; i++)
        MPI_Sendrecv(t->out, t->bytes, MPI_BYTE, right, 34, t->in, t->bytes, MPI_BYTE, left, 34, t->comm,
                     MPI_STATUS_IGNORE);
    return NULL;
}

int main(int argc, char **argv) {
    char name[4096];
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(world, &me);
    MPI_Comm_size(world, &n);
    right = (me + 1) % n;
    left = (me + n - 1) % n;
    snprintf(name, sizeof name, "%s.%d", argv[1], me);
    out = fopen(name, "w");

    /* blocking, synchronous, ready, buffered */
    begin(2); post(3, MPI_DOUBLE); MPI_Send(sbuf, 3, MPI_DOUBLE, right, 2, world); done();
    sent("p2p", right, 24, 1); end();
    begin(3); post(5, MPI_INT); MPI_Ssend(sbuf, 5, MPI_INT, right, 3, world); done();
    sent("p2p", right, 20, 1); end();
    begin(4); post(7, MPI_BYTE); MPI_Rsend(sbuf, 7, MPI_BYTE, right, 4, world); done();
    sent("p2p", right, 7, 1); end();
    MPI_Buffer_attach(bsend_space, sizeof bsend_space);
    begin(5); post(9, MPI_FLOAT); MPI_Bsend(sbuf, 9, MPI_FLOAT, right, 5, world); done();
    sent("p2p", right, 36, 1); end();

    /* nonblocking */
    begin(6); post(11, MPI_SHORT); MPI_Isend(sbuf, 11, MPI_SHORT, right, 6, world, &rq[1]);
    MPI_Wait(&rq[1], MPI_STATUS_IGNORE); done(); sent("p2p", right, 22, 1); end();
    begin(7); post(13, MPI_CHAR); MPI_Issend(sbuf, 13, MPI_CHAR, right, 7, world, &rq[1]);
    MPI_Wait(&rq[1], MPI_STATUS_IGNORE); done(); sent("p2p", right, 13, 1); end();
    begin(8); post(15, MPI_INT); MPI_Irsend(sbuf, 15, MPI_INT, right, 8, world, &rq[1]);
    MPI_Wait(&rq[1], MPI_STATUS_IGNORE); done(); sent("p2p", right, 60, 1); end();
    begin(9); post(17, MPI_BYTE); MPI_Ibsend(sbuf, 17, MPI_BYTE, right, 9, world, &rq[1]);
    MPI_Wait(&rq[1], MPI_STATUS_IGNORE); done(); sent("p2p", right, 17, 1); end();

    /* persistent: counted at each start */
    begin(10);
    MPI_Send_init(sbuf, 19, MPI_BYTE, right, 10, world, &rq[0]);
    MPI_Recv_init(rbuf, 19, MPI_BYTE, left, 10, world, &rq[1]);
    MPI_Ssend_init(sbuf + 100, 21, MPI_BYTE, right, 11, world, &rq[2]);
    MPI_Recv_init(rbuf + 100, 21, MPI_BYTE, left, 11, world, &rq[3]);
    for (int i = 0; i < 3; i++) {
        MPI_Start(&rq[1]); MPI_Start(&rq[0]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    }
    for (int i = 0; i < 2; i++) {
        MPI_Startall(2, &rq[2]);   /* the synchronous send and its receive */
        MPI_Waitall(2, &rq[2], MPI_STATUSES_IGNORE);
    }
    for (int i = 0; i < 4; i++) MPI_Request_free(&rq[i]);
    sent("p2p", right, 3 * 19 + 2 * 21, 5); end();

    begin(11);
    MPI_Sendrecv(sbuf, 23, MPI_BYTE, right, 11, rbuf, 23, MPI_BYTE, left, 11, world, MPI_STATUS_IGNORE);
    MPI_Sendrecv_replace(rbuf, 25, MPI_INT, right, 12, left, 12, world, MPI_STATUS_IGNORE);
    sent("p2p", right, 23 + 100, 2); end();

    /* a derived datatype counts its data, not its extent: 2 x (4 blocks of 3 doubles) */
    MPI_Datatype vec;
    MPI_Type_vector(4, 3, 5, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    begin(12); post(2, vec); MPI_Send(sbuf, 2, vec, right, 12, world); done();
    sent("p2p", right, 192, 1); end();
    MPI_Type_free(&vec);

    /* communicators: ranks translated to COMM_WORLD */
    begin(13);
    MPI_Comm sub, dup;
    MPI_Comm_split(world, me % 2, -me, &sub);   /* reversed order in each parity class */
    int s_rank, s_size, members[4096], k = 0;
    MPI_Comm_rank(sub, &s_rank);
    MPI_Comm_size(sub, &s_size);
    for (int q = n - 1; q >= 0; q--)
        if (q % 2 == me % 2) members[k++] = q;
    int s_right = (s_rank + 1) % s_size, s_left = (s_rank + s_size - 1) % s_size;
    MPI_Comm_dup(sub, &dup);
    MPI_Sendrecv(sbuf, 27, MPI_BYTE, s_right, 13, rbuf, 27, MPI_BYTE, s_left, 13, sub, MPI_STATUS_IGNORE);
    MPI_Sendrecv(sbuf, 127, MPI_BYTE, s_right, 13, rbuf, 127, MPI_BYTE, s_left, 13, dup, MPI_STATUS_IGNORE);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&sub);
    sent("p2p", members[s_right], 27 + 127, 2); end();

    begin(14);
    MPI_Comm cart;
    int dims[1] = {n}, periods[1] = {1}, src, dst;
    MPI_Cart_create(world, 1, dims, periods, 0, &cart);
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    MPI_Sendrecv(sbuf, 29, MPI_BYTE, dst, 14, rbuf, 29, MPI_BYTE, src, 14, cart, MPI_STATUS_IGNORE);
    sent("p2p", right, 29, 1); end();
    begin(33);   /* neighbourhood collectives name their peers: left, then right */
    MPI_Neighbor_allgather(sbuf, 31, MPI_BYTE, rbuf, 31, MPI_BYTE, cart);
    if (n > 2) { sent("collective", left, 31, 1); sent("collective", right, 31, 1); }
    else sent("collective", right, 62, 2);
    end();
    MPI_Comm_free(&cart);

    begin(15);   /* an intercommunicator between the even and the odd ranks */
    MPI_Comm half, inter;
    int h_rank;
    MPI_Comm_split(world, me % 2, me, &half);
    MPI_Comm_rank(half, &h_rank);
    MPI_Intercomm_create(half, 0, world, 1 - me % 2, 15, &inter);
    if (h_rank == 0) {   /* the leaders, world ranks 0 and 1 */
        MPI_Sendrecv(sbuf, 33, MPI_BYTE, 0, 15, rbuf, 33, MPI_BYTE, 0, 15, inter, MPI_STATUS_IGNORE);
        sent("p2p", 1 - me, 33, 1);
    }
    int root = me % 2 ? 0 : (h_rank == 0 ? MPI_ROOT : MPI_PROC_NULL);
    MPI_Bcast(sbuf, 34, MPI_BYTE, root, inter);   /* world 0 to every odd rank */
    if (me == 0)
        for (int q = 1; q < n; q += 2) sent("collective", q, 34, 1);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    end();

    /* collectives under the root model */
    int r0 = 1 % n;
    begin(16); MPI_Bcast(sbuf, 35, MPI_DOUBLE, r0, world);
    if (me == r0) for (int q = 0; q < n; q++) sent("collective", q, 280, 1);
    end();
    begin(17); MPI_Allreduce(MPI_IN_PLACE, rbuf, 37, MPI_INT, MPI_SUM, world);
    if (me) sent("collective", 0, 148, 1); else for (int q = 1; q < n; q++) sent("collective", q, 148, 1);
    end();
    begin(18); MPI_Gather(sbuf, 39, MPI_BYTE, rbuf, 39, MPI_BYTE, 0, world);
    if (me) sent("collective", 0, 39, 1);
    end();
    int counts[4096], displs[4096], rcounts[4096], rdispls[4096];
    for (int q = 0, at = 0; q < n; at += q + 41, q++) { counts[q] = q + 41; displs[q] = at; }
    begin(19); MPI_Scatterv(sbuf, counts, displs, MPI_BYTE, rbuf, me + 41, MPI_BYTE, 0, world);
    if (!me) for (int q = 1; q < n; q++) sent("collective", q, q + 41, 1);
    end();
    begin(20); MPI_Alltoall(sbuf, 43, MPI_BYTE, rbuf, 43, MPI_BYTE, world);
    for (int q = 0; q < n; q++) sent("collective", q, 43, 1);
    end();
    for (int q = 0, at = 0, rat = 0; q < n; at += q + 45, rat += me + 45, q++) {
        counts[q] = q + 45; displs[q] = at; rcounts[q] = me + 45; rdispls[q] = rat;
    }
    begin(21); MPI_Alltoallv(sbuf, counts, displs, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, world);
    for (int q = 0; q < n; q++) sent("collective", q, 4 * (q + 45), 1);
    end();
    for (int q = 0, at = 0; q < n; at += me + q + 51, q++) {
        counts[q] = 999; displs[q] = 0; rcounts[q] = me + q + 51; rdispls[q] = at;
    }
    begin(36);   /* in place: what goes to q is what comes from q; the send counts are not read */
    MPI_Alltoallv(MPI_IN_PLACE, counts, displs, MPI_DOUBLE, rbuf, rcounts, rdispls, MPI_INT, world);
    for (int q = 0; q < n; q++) sent("collective", q, 4 * (me + q + 51), 1);
    end();
    begin(22); MPI_Reduce_scatter_block(sbuf, rbuf, 47, MPI_DOUBLE, MPI_SUM, world);
    if (me) sent("collective", 0, 376.0 * n, 1); else for (int q = 1; q < n; q++) sent("collective", q, 376, 1);
    end();
    begin(23); MPI_Scan(sbuf, rbuf, 49, MPI_UNSIGNED_CHAR, MPI_SUM, world);
    if (me + 1 < n) sent("collective", me + 1, 49, 1);
    end();
    begin(24); MPI_Iallreduce(sbuf, rbuf, 51, MPI_INT, MPI_SUM, world, &rq[0]); MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    if (me) sent("collective", 0, 204, 1); else for (int q = 1; q < n; q++) sent("collective", q, 204, 1);
    end();

    /* one-sided: a Get counts as traffic from the target */
    MPI_Win win;
    MPI_Win_create(rbuf, sizeof rbuf, 1, MPI_INFO_NULL, world, &win);
    begin(28);
    MPI_Win_fence(0, win);
    MPI_Put(sbuf, 59, MPI_BYTE, right, 0, 59, MPI_BYTE, win);
    MPI_Win_fence(0, win);
    MPI_Get(sbuf + 1000, 61, MPI_BYTE, left, 0, 61, MPI_BYTE, win);
    MPI_Win_fence(0, win);
    MPI_Accumulate(sbuf, 63, MPI_INT, right, 0, 63, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    sent("rma", right, 59 + 252, 2);
    row("rma", left, me, 61, 1);
    end();
    MPI_Win_free(&win);

    begin(31);   /* a communicator from a group, ranks reversed */
    MPI_Group wg, rg;
    int ranks[4096];
    for (int q = 0; q < n; q++) ranks[q] = n - 1 - q;
    MPI_Comm_group(world, &wg);
    MPI_Group_incl(wg, n, ranks, &rg);
    MPI_Comm rev;
    MPI_Comm_create_group(world, rg, 31, &rev);
    int rr = n - 1 - me;
    MPI_Sendrecv(sbuf, 67, MPI_BYTE, (rr + 1) % n, 31, rbuf, 67, MPI_BYTE, (rr + n - 1) % n, 31, rev,
                 MPI_STATUS_IGNORE);
    sent("p2p", n - 1 - (rr + 1) % n, 67, 1);
    MPI_Comm_free(&rev);
    MPI_Group_free(&rg);
    MPI_Group_free(&wg);
    end();

    begin(32);   /* a distributed graph: out-neighbours right, left */
    MPI_Comm dg;
    int outs[2] = {right, left}, ins[2] = {left, right}, sc[2] = {69, 71}, sd[2] = {0, 100}, rd[2] = {0, 100};
    MPI_Dist_graph_create_adjacent(world, 2, ins, MPI_UNWEIGHTED, 2, outs, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg);
    MPI_Neighbor_alltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, sc, rd, MPI_BYTE, dg);
    if (n > 2) { sent("collective", right, 69, 1); sent("collective", left, 71, 1); }
    else sent("collective", right, 140, 2);
    MPI_Comm_free(&dg);
    end();

    if (provided == MPI_THREAD_MULTIPLE) {
        begin(34);
        struct ring rings[2] = {{.bytes = 73}, {.bytes = 79}};
        pthread_t threads[2];
        for (int t = 0; t < 2; t++) MPI_Comm_dup(world, &rings[t].comm);
        for (int t = 0; t < 2; t++) pthread_create(&threads[t], NULL, thread_ring, &rings[t]);
        for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
        for (int t = 0; t < 2; t++) MPI_Comm_free(&rings[t].comm);
        sent("p2p", right, 100 * (73 + 79), 200);
        end();
    }

    begin(35);   /* a graph topology: each rank's neighbours are right, then left */
    MPI_Comm graph;
    int *index = malloc(n * sizeof(int)), *edges = malloc(2 * n * sizeof(int));
    for (int q = 0; q < n; q++) {
        index[q] = 2 * (q + 1);
        edges[2 * q] = (q + 1) % n;
        edges[2 * q + 1] = (q + n - 1) % n;
    }
    MPI_Graph_create(world, n, index, edges, 0, &graph);
    MPI_Neighbor_allgather(sbuf, 75, MPI_BYTE, rbuf, 75, MPI_BYTE, graph);
    sent("collective", right, 75, 1);
    sent("collective", left, 75, 1);
    MPI_Comm_free(&graph);
    free(index);
    free(edges);
    end();

    /* paused: nothing recorded */
    MPI_Pcontrol(0);
    MPI_Sendrecv(sbuf, 1000, MPI_BYTE, right, 29, rbuf, 1000, MPI_BYTE, left, 29, world, MPI_STATUS_IGNORE);
    MPI_Pcontrol(1);

#if MPI_VERSION >= 4
    begin(25);   /* persistent collective: counted at each start */
    MPI_Bcast_init(sbuf, 53, MPI_BYTE, 0, world, MPI_INFO_NULL, &rq[0]);
    for (int i = 0; i < 2; i++) { MPI_Start(&rq[0]); MPI_Wait(&rq[0], MPI_STATUS_IGNORE); }
    MPI_Request_free(&rq[0]);
    if (!me) for (int q = 1; q < n; q++) sent("collective", q, 106, 2);
    end();
    begin(26);   /* partitioned: 4 partitions of 55 bytes */
    MPI_Precv_init(rbuf, 4, 55, MPI_BYTE, left, 26, world, MPI_INFO_NULL, &rq[0]);
    MPI_Psend_init(sbuf, 4, 55, MPI_BYTE, right, 26, world, MPI_INFO_NULL, &rq[1]);
    MPI_Startall(2, rq);
    MPI_Pready_range(0, 3, rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);
    sent("p2p", right, 220, 1);
    end();
    begin(27);
    MPI_Isendrecv(sbuf, 57, MPI_BYTE, right, 27, rbuf, 57, MPI_BYTE, left, 27, world, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    sent("p2p", right, 57, 1);
    end();
    begin(30);   /* large count */
    MPI_Sendrecv_c(sbuf, 65, MPI_BYTE, right, 30, rbuf, 65, MPI_BYTE, left, 30, world, MPI_STATUS_IGNORE);
    sent("p2p", right, 65, 1);
    end();
#endif
    void *attached;
    MPI_Buffer_detach(&attached, &k);
    fclose(out);
    printf("rank %d: ok\n", me);
    MPI_Finalize();
    return 0;
}
