/* rankmap's PMPI interposition library: counters, communicator tables,
 * snapshots.  The wrappers of the MPI calls are generated next to this file
 * (rankmap/profile/native/calls.py) and call the rm_* functions here.
 *
 * What a rank sent is kept as dense rows indexed by COMM_WORLD rank (index
 * world_size: processes outside COMM_WORLD), per phase and kind (p2p, exact
 * collective sends, one-sided put, one-sided get), plus collective events
 * (phase, group, operation, root) -> (sum of unit bytes, calls) that the
 * Python side turns into pairs with rankmap's collective models.  A group
 * is a communicator's members as COMM_WORLD ranks (the remote group of an
 * intercommunicator), kept once however many communicators share it.
 *
 * Communicator and window tables are built at first use from the group and
 * dropped by an attribute delete callback when the program frees the
 * handle, so every way of making a communicator (split, dup, create, Cartesian,
 * graph, intercommunicators, merge, spawn) translates ranks the same way.
 *
 * The process started by `python -m rankmap.profile` passes, in the
 * environment: RANKMAP_PMPI_COUNTS (snapshot file), RANKMAP_PMPI_SOCKET (a
 * socket to it), RANKMAP_PMPI_MODEL, RANKMAP_PMPI_PHASE, RANKMAP_PMPI_PAUSED,
 * RANKMAP_PMPI_INTERVAL.  Without RANKMAP_PMPI_COUNTS the library records
 * nothing.  A thread writes a snapshot (temp file + rename) every interval
 * when the counters changed and says so on the socket: 'S' started (the
 * parent answers 'A' once its part file exists), 'F' written, 'T' nothing
 * new, 'E' the final snapshot (MPI_Finalize, or exit without it).  The
 * parent may ask for a snapshot now with 'R'.
 *
 * Snapshot layout (host byte order; str = i64 length + bytes):
 *   "RMCOUNTS" u32 version u32 status(0 started 1 flushed 2 finalized 3 exited)
 *   i64 rank, size, node_leader, pid   f64 t_start, t_end
 *   str host, mpi_library, mpi_standard   i64 ncpus  i32 cpus[ncpus]
 *   i64 nops  str op[nops]   i64 nphases  str phase[nphases]
 *   4 x (kind p2p, collective, put, get): i64 k  i32 phase[k] i32 peer[k] f64 bytes[k] i64 msgs[k]
 *   i64 ngroups, per group: i32 inter, me, size, ranks[size]
 *   i64 nevents  i32 phase[] group[] op[] root[]  f64 unit[]  i64 calls[]
 *   "RMCEND\0\0"
 */
#define _GNU_SOURCE
#include "rankmap_pmpi.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SNAPSHOT_VERSION 1
enum { ST_STARTED, ST_FLUSHED, ST_FINALIZED, ST_EXITED };
enum { K_P2P, K_COLL, K_PUT, K_GET, NKINDS };
enum { M_NONE, M_ROOT, M_TREE, M_RING };
static const char *const OP_NAMES[RM_NOPS] = {
    "bcast", "reduce", "scatter", "gather", "allgather", "allreduce", "alltoall",
    "reduce_scatter", "scan"};

__thread int rm_depth __attribute__((tls_model("initial-exec")));
volatile int rm_recording;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&lock)
#define UNLOCK() pthread_mutex_unlock(&lock)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "rankmap.profile: out of memory\n");
        abort();
    }
    return p;
}

static void *xgrow(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "rankmap.profile: out of memory\n");
        abort();
    }
    return p;
}

/* ------------------------------------------------------------ handle maps */
/* open addressing over 64-bit keys (a handle's bits), tombstones on delete */
typedef struct { uint64_t key; void *val; unsigned char state; } slot_t;  /* 0 free 1 used 2 gone */
typedef struct { slot_t *s; size_t cap, used, filled; } map_t;

static uint64_t mix(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL;
    return k ^ (k >> 33);
}

static uint64_t handle_key(const void *h, size_t n) {
    uint64_t k = 0;
    memcpy(&k, h, n < sizeof k ? n : sizeof k);
    return k;
}

static void *map_get(map_t *m, uint64_t key) {
    if (!m->cap) return NULL;
    for (size_t i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->s[i].state == 0) return NULL;
        if (m->s[i].state == 1 && m->s[i].key == key) return m->s[i].val;
    }
}

static void map_put(map_t *m, uint64_t key, void *val);

static void map_rehash(map_t *m, size_t cap) {
    map_t old = *m;
    m->s = xalloc(cap * sizeof(slot_t));
    m->cap = cap;
    m->used = m->filled = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.s[i].state == 1) map_put(m, old.s[i].key, old.s[i].val);
    free(old.s);
}

static void map_put(map_t *m, uint64_t key, void *val) {
    if (2 * (m->filled + 1) > m->cap) map_rehash(m, m->cap ? (m->used * 4 > m->cap ? 2 * m->cap : m->cap) : 64);
    size_t gone = (size_t)-1;
    for (size_t i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        slot_t *s = &m->s[i];
        if (s->state == 1 && s->key == key) { s->val = val; return; }
        if (s->state == 2 && gone == (size_t)-1) gone = i;
        if (s->state == 0) {
            if (gone != (size_t)-1) s = &m->s[gone]; else m->filled++;
            s->key = key; s->val = val; s->state = 1;
            m->used++;
            return;
        }
    }
}

static void *map_del(map_t *m, uint64_t key) {
    if (!m->cap) return NULL;
    for (size_t i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        slot_t *s = &m->s[i];
        if (s->state == 0) return NULL;
        if (s->state == 1 && s->key == key) { s->state = 2; m->used--; return s->val; }
    }
}

/* ------------------------------------------------------------------ state */
typedef struct { char *name; double *b[NKINDS]; int64_t *m[NKINDS]; } phase_t;
typedef struct { int inter, me, size; int *ranks; uint64_t hash; } group_t;
typedef struct { int phase, group, op, root; double unit; int64_t calls; } event_t;
typedef struct { int group; int nbr_ready, nnbr; int *nbr; } comm_t;   /* nbr: world rank or -1 */
typedef struct { int kind, world; double bytes; } send_t;
typedef struct { int nsend; send_t *send; int has_event, group, op, root; double unit; } plan_t;

static struct {
    int rank, size, leader, model, interval_ms, sock, paused;
    pid_t pid;
    double t_start;
    char host[256], library[256], standard[32];
    char *counts_path;
    int ncpus; int *cpus;
    MPI_Group world_group;
    int comm_key, win_key, end_key;
    phase_t *phases; int nphases;
    int active;            /* phase index, or -1 while paused */
    char *phase_name;      /* the phase to record into (set while paused too) */
    char *pcontrol_base;   /* the phase Pcontrol(1) returns to */
    group_t *groups; int ngroups; int *group_slots; size_t group_cap;
    event_t *events; int nevents; int *event_slots; size_t event_cap;
    map_t comms, wins, plans;
    uint64_t cache_key; comm_t *cache;   /* the last communicator looked up */
    plan_t *building;      /* a persistent call being recorded */
    uint64_t gen, written_gen;
    int stop_pipe[2];
    pthread_t flusher;
    int flusher_running, finished, begun, write_failed;
} rm;

/* ----------------------------------------------------------------- phases */
static int phase_index(const char *name) {
    for (int i = 0; i < rm.nphases; i++)
        if (!strcmp(rm.phases[i].name, name)) return i;
    rm.phases = xgrow(rm.phases, (size_t)(rm.nphases + 1) * sizeof(phase_t));
    phase_t *p = &rm.phases[rm.nphases];
    p->name = strdup(name);
    for (int k = 0; k < NKINDS; k++) {
        p->b[k] = xalloc((size_t)(rm.size + 1) * sizeof(double));
        p->m[k] = xalloc((size_t)(rm.size + 1) * sizeof(int64_t));
    }
    rm.gen++;   /* a new (empty) phase is part of the record */
    return rm.nphases++;
}

static void set_phase(const char *name) {
    if (name != rm.phase_name) {
        free(rm.phase_name);
        rm.phase_name = strdup(name);
    }
    rm.active = rm.paused ? -1 : phase_index(rm.phase_name);
}

static void set_paused(int paused) {
    rm.paused = paused;
    set_phase(rm.phase_name);
}

void rm_pcontrol(int level) {
    if (!rm_recording) return;
    LOCK();
    int in_pc = !strncmp(rm.phase_name, "pcontrol-", 9);
    if (level == 0) {
        set_paused(1);
    } else if (level == 1) {
        rm.paused = 0;
        set_phase(in_pc ? rm.pcontrol_base : rm.phase_name);
    } else {
        char name[32];
        if (!in_pc) {
            free(rm.pcontrol_base);
            rm.pcontrol_base = strdup(rm.phase_name);
        }
        snprintf(name, sizeof name, "pcontrol-%d", level);
        rm.paused = 0;
        set_phase(name);
    }
    UNLOCK();
}

/* ----------------------------------------------------------------- groups */
static uint64_t group_hash(int inter, int me, int size, const int *ranks) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(inter * 2 + 1) ^ ((uint64_t)(me + 2) << 32);
    for (int i = 0; i < size; i++) h = (h ^ (uint64_t)(uint32_t)ranks[i]) * 1099511628211ULL;
    return h ^ (uint64_t)size;
}

static int group_intern(int inter, int me, int size, int *ranks) {
    uint64_t h = group_hash(inter, me, size, ranks);
    if (2 * (size_t)(rm.ngroups + 1) > rm.group_cap) {
        size_t cap = rm.group_cap ? 2 * rm.group_cap : 64;
        free(rm.group_slots);
        rm.group_slots = xalloc(cap * sizeof(int));
        rm.group_cap = cap;
        for (int g = 0; g < rm.ngroups; g++) {
            size_t i = mix(rm.groups[g].hash) & (cap - 1);
            while (rm.group_slots[i]) i = (i + 1) & (cap - 1);
            rm.group_slots[i] = g + 1;
        }
    }
    size_t i = mix(h) & (rm.group_cap - 1);
    for (; rm.group_slots[i]; i = (i + 1) & (rm.group_cap - 1)) {
        group_t *g = &rm.groups[rm.group_slots[i] - 1];
        if (g->hash == h && g->inter == inter && g->me == me && g->size == size &&
            !memcmp(g->ranks, ranks, (size_t)size * sizeof(int))) {
            free(ranks);
            return rm.group_slots[i] - 1;
        }
    }
    rm.groups = xgrow(rm.groups, (size_t)(rm.ngroups + 1) * sizeof(group_t));
    rm.groups[rm.ngroups] = (group_t){inter, me, size, ranks, h};
    rm.group_slots[i] = rm.ngroups + 1;
    rm.gen++;
    return rm.ngroups++;
}

/* world ranks of a group (UNDEFINED: outside COMM_WORLD, index world_size) */
static int group_of(MPI_Group g, int inter, int me) {
    int size;
    PMPI_Group_size(g, &size);
    int *in = xalloc((size_t)size * sizeof(int)), *out = xalloc((size_t)size * sizeof(int));
    for (int i = 0; i < size; i++) in[i] = i;
    PMPI_Group_translate_ranks(g, size, in, rm.world_group, out);
    for (int i = 0; i < size; i++)
        if (out[i] < 0 || out[i] >= rm.size) out[i] = rm.size;
    free(in);
    return group_intern(inter, me, size, out);
}

/* ------------------------------------------------------ communicator tables */
static int comm_gone(MPI_Comm comm, int keyval, void *val, void *extra) {
    (void)keyval; (void)extra;
    LOCK();
    uint64_t key = handle_key(&comm, sizeof comm);
    if (map_get(&rm.comms, key) == val) map_del(&rm.comms, key);
    if (rm.cache == val) rm.cache = NULL;
    comm_t *c = val;
    free(c->nbr);
    free(c);
    UNLOCK();
    return MPI_SUCCESS;
}

static comm_t *comm_entry(MPI_Comm comm) {
    uint64_t key = handle_key(&comm, sizeof comm);
    if (rm.cache && rm.cache_key == key) return rm.cache;
    comm_t *c = map_get(&rm.comms, key);
    if (!c) {
        int inter, me = -1;
        MPI_Group g;
        PMPI_Comm_test_inter(comm, &inter);
        if (inter) PMPI_Comm_remote_group(comm, &g);
        else {
            PMPI_Comm_group(comm, &g);
            PMPI_Comm_rank(comm, &me);
        }
        c = xalloc(sizeof *c);
        c->group = group_of(g, inter, me);
        PMPI_Group_free(&g);
        map_put(&rm.comms, key, c);
        PMPI_Comm_set_attr(comm, rm.comm_key, c);
    }
    rm.cache_key = key;
    rm.cache = c;
    return c;
}

/* out-neighbours of a process topology in MPI's order, as world ranks */
static void neighbours(MPI_Comm comm, comm_t *c) {
    int topo, n = 0, *peers = NULL;
    c->nbr_ready = 1;
    PMPI_Topo_test(comm, &topo);
    if (topo == MPI_CART) {
        int dims;
        PMPI_Cartdim_get(comm, &dims);
        peers = xalloc((size_t)(2 * dims) * sizeof(int));
        for (int d = 0; d < dims; d++, n += 2) PMPI_Cart_shift(comm, d, 1, &peers[n], &peers[n + 1]);
    } else if (topo == MPI_GRAPH) {
        int me;
        PMPI_Comm_rank(comm, &me);
        PMPI_Graph_neighbors_count(comm, me, &n);
        peers = xalloc((size_t)n * sizeof(int));
        PMPI_Graph_neighbors(comm, me, n, peers);
    } else if (topo == MPI_DIST_GRAPH) {
        int indeg, weighted;
        PMPI_Dist_graph_neighbors_count(comm, &indeg, &n, &weighted);
        int *in = xalloc((size_t)indeg * sizeof(int)), *inw = xalloc((size_t)indeg * sizeof(int));
        int *outw = xalloc((size_t)n * sizeof(int));
        peers = xalloc((size_t)n * sizeof(int));
        PMPI_Dist_graph_neighbors(comm, indeg, in, inw, n, peers, outw);
        free(in); free(inw); free(outw);
    }
    const group_t *g = &rm.groups[c->group];
    for (int i = 0; i < n; i++) peers[i] = peers[i] >= 0 && peers[i] < g->size ? g->ranks[peers[i]] : -1;
    c->nnbr = n;
    c->nbr = peers;
}

static int win_gone(MPI_Win win, int keyval, void *val, void *extra) {
    (void)keyval; (void)extra;
    LOCK();
    uint64_t key = handle_key(&win, sizeof win);
    if (map_get(&rm.wins, key) == val) map_del(&rm.wins, key);
    free(val);
    UNLOCK();
    return MPI_SUCCESS;
}

static const group_t *win_group(MPI_Win win) {
    uint64_t key = handle_key(&win, sizeof win);
    int *g = map_get(&rm.wins, key);
    if (!g) {
        MPI_Group wg;
        PMPI_Win_get_group(win, &wg);
        g = xalloc(sizeof *g);
        *g = group_of(wg, 0, -1);
        PMPI_Group_free(&wg);
        map_put(&rm.wins, key, g);
        PMPI_Win_set_attr(win, rm.win_key, g);
    }
    return &rm.groups[*g];
}

/* ------------------------------------------------------------- recording */
static event_t *event_slot(int phase, int group, int op, int root) {
    uint64_t h = mix(((uint64_t)(uint32_t)phase << 32 | (uint32_t)group) ^ mix((uint64_t)op << 32 | (uint32_t)root));
    if (2 * (size_t)(rm.nevents + 1) > rm.event_cap) {
        size_t cap = rm.event_cap ? 2 * rm.event_cap : 256;
        free(rm.event_slots);
        rm.event_slots = xalloc(cap * sizeof(int));
        rm.event_cap = cap;
        for (int e = 0; e < rm.nevents; e++) {
            event_t *x = &rm.events[e];
            uint64_t hx = mix(((uint64_t)(uint32_t)x->phase << 32 | (uint32_t)x->group) ^
                              mix((uint64_t)x->op << 32 | (uint32_t)x->root));
            size_t i = hx & (cap - 1);
            while (rm.event_slots[i]) i = (i + 1) & (cap - 1);
            rm.event_slots[i] = e + 1;
        }
    }
    size_t i = h & (rm.event_cap - 1);
    for (; rm.event_slots[i]; i = (i + 1) & (rm.event_cap - 1)) {
        event_t *x = &rm.events[rm.event_slots[i] - 1];
        if (x->phase == phase && x->group == group && x->op == op && x->root == root) return x;
    }
    rm.events = xgrow(rm.events, (size_t)(rm.nevents + 1) * sizeof(event_t));
    rm.events[rm.nevents] = (event_t){phase, group, op, root, 0.0, 0};
    rm.event_slots[i] = rm.nevents + 1;
    return &rm.events[rm.nevents++];
}

/* count now, or add to the persistent call's plan while one is built */
static void emit_row(int kind, int world, double bytes) {
    if (rm.building) {
        plan_t *p = rm.building;
        p->send = xgrow(p->send, (size_t)(p->nsend + 1) * sizeof(send_t));
        p->send[p->nsend++] = (send_t){kind, world, bytes};
    } else if (rm.active >= 0) {
        phase_t *ph = &rm.phases[rm.active];
        ph->b[kind][world] += bytes;
        ph->m[kind][world] += 1;
        rm.gen++;
    }
}

static void emit_event(int group, int op, int root, double unit) {
    if (rm.building) {
        plan_t *p = rm.building;
        p->has_event = 1;
        p->group = group; p->op = op; p->root = root; p->unit = unit;
    } else if (rm.active >= 0) {
        event_t *e = event_slot(rm.active, group, op, root);
        e->unit += unit;
        e->calls += 1;
        rm.gen++;
    }
}

static void plan_free(plan_t *p) {
    if (p) {
        free(p->send);
        free(p);
    }
}

/* enter/leave a recording function: the lock, and a plan for a persistent call */
static void enter(MPI_Request *persist) {
    LOCK();
    rm.building = persist ? xalloc(sizeof(plan_t)) : NULL;
}

static void leave(MPI_Request *persist) {
    if (persist) {
        uint64_t key = handle_key(persist, sizeof *persist);
        plan_free(map_del(&rm.plans, key));
        map_put(&rm.plans, key, rm.building);
        rm.building = NULL;
    }
    UNLOCK();
}

static double type_bytes(MPI_Count count, MPI_Datatype type) {
    MPI_Count size = 0;
    if (count == 0) return 0.0;
    PMPI_Type_size_x(type, &size);
    return (double)count * (double)size;
}

/* RM_FORTRAN: the MPI has Fortran handles (MPICH's standard ABI has none) */
static MPI_Datatype handle_type(rm_handles h, int i) {
    i *= h.step;
#ifdef RM_FORTRAN
    if (h.fortran) return PMPI_Type_f2c(((const MPI_Fint *)h.p)[i]);
#endif
    return ((const MPI_Datatype *)h.p)[i];
}

static MPI_Count count_at(rm_counts c, int i) {
    i *= c.step;
    return c.wide ? ((const MPI_Count *)c.p)[i] : (MPI_Count)((const int *)c.p)[i];
}

void rm_p2p(MPI_Comm comm, int dest, MPI_Count count, MPI_Datatype type, MPI_Request *persist) {
    if (dest < 0) return;   /* MPI_PROC_NULL */
    double bytes = type_bytes(count, type);
    enter(persist);
    const comm_t *c = comm_entry(comm);   /* may grow rm.groups */
    const group_t *g = &rm.groups[c->group];
    if (dest < g->size) emit_row(K_P2P, g->ranks[dest], bytes);
    leave(persist);
}

void rm_start(rm_handles requests, int count) {
    LOCK();
    for (int i = 0; i < count; i++) {
        int at = i * requests.step;
        MPI_Request r = ((const MPI_Request *)requests.p)[at];
#ifdef RM_FORTRAN
        if (requests.fortran) r = PMPI_Request_f2c(((const MPI_Fint *)requests.p)[at]);
#endif
        plan_t *p = map_get(&rm.plans, handle_key(&r, sizeof r));
        if (!p) continue;   /* a receive, or a request the program made before recording */
        for (int s = 0; s < p->nsend; s++) emit_row(p->send[s].kind, p->send[s].world, p->send[s].bytes);
        if (p->has_event) emit_event(p->group, p->op, p->root, p->unit);
    }
    UNLOCK();
}

void rm_forget(MPI_Request request) {
    LOCK();
    plan_free(map_del(&rm.plans, handle_key(&request, sizeof request)));
    UNLOCK();
}

/* ------------------------------------------------------------ collectives */
/* A recording function holds the lock from `collective` to `leave`; the
 * communicator's group says inter or intra, this rank's rank, the peers. */
static const group_t *collective(MPI_Comm comm, MPI_Request *persist, int *gid) {
    enter(persist);
    *gid = comm_entry(comm)->group;
    return &rm.groups[*gid];
}

/* one collective with a model: `unit` bytes of operation `op` at `root`
 * (intercommunicators: MPI_ROOT is -2, MPI_PROC_NULL sends nothing) */
static void event(int gid, const group_t *g, int op, int root, double unit) {
    if (g->inter && root == MPI_PROC_NULL) return;
    emit_event(gid, op, g->inter && root == MPI_ROOT ? -2 : root, unit);
}

static int is_root(const group_t *g, int root) { return g->inter ? root == MPI_ROOT : root == g->me; }

/* an exact send to comm rank q (none to itself, none of 0 bytes) */
static void exact(const group_t *g, int q, double bytes) {
    if (bytes != 0.0 && q != g->me) emit_row(K_COLL, g->ranks[q], bytes);
}

void rm_vector(MPI_Comm comm, int op, MPI_Count count, MPI_Datatype type, int root,
               MPI_Request *persist) {
    if (rm.model == M_NONE) return;
    double unit = type_bytes(count, type);
    int gid;
    const group_t *g = collective(comm, persist, &gid);
    event(gid, g, op, root, unit);
    leave(persist);
}

void rm_rooted(MPI_Comm comm, int op, int root, MPI_Count root_count, MPI_Datatype root_type,
               MPI_Count count, MPI_Datatype type, MPI_Request *persist) {
    if (rm.model == M_NONE) return;
    int gid;
    const group_t *g = collective(comm, persist, &gid);
    event(gid, g, op, root, is_root(g, root) ? type_bytes(root_count, root_type) : type_bytes(count, type));
    leave(persist);
}

void rm_scatterv(MPI_Comm comm, rm_counts scounts, MPI_Datatype stype, MPI_Count rcount,
                 MPI_Datatype rtype, int root, MPI_Request *persist) {
    if (rm.model == M_NONE) return;
    int gid;
    const group_t *g = collective(comm, persist, &gid);
    if (!is_root(g, root)) event(gid, g, RM_SCATTER, root, type_bytes(rcount, rtype));
    else if (rm.model == M_ROOT || g->inter)   /* the root model sends each its own */
        for (int q = 0; q < g->size; q++) exact(g, q, type_bytes(count_at(scounts, q), stype));
    else {
        double total = 0.0;
        for (int q = 0; q < g->size; q++) total += type_bytes(count_at(scounts, q), stype);
        event(gid, g, RM_SCATTER, root, total / g->size);
    }
    leave(persist);
}

void rm_allgatherv(MPI_Comm comm, MPI_Count scount, MPI_Datatype stype, rm_counts rcounts,
                   MPI_Datatype rtype, MPI_Request *persist) {
    if (rm.model == M_NONE) return;
    int gid;
    const group_t *g = collective(comm, persist, &gid);   /* the own block, in place or not */
    event(gid, g, RM_ALLGATHER, 0, g->inter ? type_bytes(scount, stype) : type_bytes(count_at(rcounts, g->me), rtype));
    leave(persist);
}

void rm_reduce_scatter(MPI_Comm comm, rm_counts rcounts, MPI_Datatype type, MPI_Request *persist) {
    if (rm.model == M_NONE) return;
    int local, gid;
    PMPI_Comm_size(comm, &local);   /* the local group's blocks */
    double total = 0.0;
    for (int q = 0; q < local; q++) total += type_bytes(count_at(rcounts, q), type);
    const group_t *g = collective(comm, persist, &gid);
    event(gid, g, RM_REDUCE_SCATTER, 0, total / g->size);
    leave(persist);
}

void rm_alltoallw(MPI_Comm comm, int in_place, rm_counts scounts, rm_handles stypes,
                  rm_counts rcounts, rm_handles rtypes, MPI_Request *persist) {
    if (rm.model == M_NONE) return;
    int gid;
    const group_t *g = collective(comm, persist, &gid);
    for (int q = 0; q < g->size; q++)
        exact(g, q, in_place ? type_bytes(count_at(rcounts, q), handle_type(rtypes, q))
                             : type_bytes(count_at(scounts, q), handle_type(stypes, q)));
    leave(persist);
}

/* neighbourhood collectives: block j to out-neighbour j */
void rm_neighbors(MPI_Comm comm, rm_counts scounts, rm_handles stypes, MPI_Request *persist) {
    if (rm.model == M_NONE) return;
    enter(persist);
    comm_t *c = comm_entry(comm);
    if (!c->nbr_ready) neighbours(comm, c);
    for (int j = 0; j < c->nnbr; j++)
        if (c->nbr[j] >= 0)   /* not MPI_PROC_NULL at a non-periodic edge */
            emit_row(K_COLL, c->nbr[j], type_bytes(count_at(scounts, j), handle_type(stypes, j)));
    leave(persist);
}

/* -------------------------------------------------------------- one-sided */
void rm_rma(MPI_Win win, int target, MPI_Count put_count, MPI_Datatype put_type,
            MPI_Count get_count, MPI_Datatype get_type) {
    if (target < 0) return;
    double put = put_count ? type_bytes(put_count, put_type) : 0.0;
    double get = get_count ? type_bytes(get_count, get_type) : 0.0;
    LOCK();
    const group_t *g = win_group(win);
    if (target < g->size) {
        if (put_count) emit_row(K_PUT, g->ranks[target], put);
        if (get_count) emit_row(K_GET, g->ranks[target], get);
    }
    UNLOCK();
}

/* ---------------------------------------------------------------- Fortran */
void *rm_fortran_next(const char *symbol) {
    void *f = dlsym(RTLD_NEXT, symbol);
    if (!f) {
        fprintf(stderr, "rankmap.profile: the MPI library has no %s\n", symbol);
        abort();
    }
    return f;
}

/* MPI_IN_PLACE in Fortran is the address of a variable of the MPI library */
int rm_fortran_in_place(const void *buf) {
    static const void *addr[6];
    static int found = -1;
    if (found < 0) {
        static const char *const names[] = {"mpi_fortran_in_place_", "mpi_fortran_in_place",
                                            "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE"};
        found = 0;
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            void *a = dlsym(RTLD_DEFAULT, names[i]);
            if (a) addr[found++] = a;
        }
        void **mpich = dlsym(RTLD_DEFAULT, "MPIR_F_MPI_IN_PLACE");   /* MPICH: a pointer to it */
        if (mpich && *mpich) addr[found++] = *mpich;
    }
    for (int i = 0; i < found; i++)
        if (buf == addr[i]) return 1;
    return 0;
}

/* -------------------------------------------------------------- snapshots */
typedef struct { char *p; size_t n, cap; } buf_t;

static void put(buf_t *b, const void *x, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = 2 * (b->n + n) + 4096;
        b->p = xgrow(b->p, b->cap);
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}

static void put_i32(buf_t *b, int32_t v) { put(b, &v, sizeof v); }
static void put_i64(buf_t *b, int64_t v) { put(b, &v, sizeof v); }
static void put_f64(buf_t *b, double v) { put(b, &v, sizeof v); }
static void put_str(buf_t *b, const char *s) {
    put_i64(b, (int64_t)strlen(s));
    put(b, s, strlen(s));
}

/* the record as bytes (under the lock) */
static void serialize(buf_t *b, int status) {
    uint32_t head[2] = {SNAPSHOT_VERSION, (uint32_t)status};
    put(b, "RMCOUNTS", 8);
    put(b, head, sizeof head);
    put_i64(b, rm.rank); put_i64(b, rm.size); put_i64(b, rm.leader); put_i64(b, rm.pid);
    put_f64(b, rm.t_start); put_f64(b, now());
    put_str(b, rm.host); put_str(b, rm.library); put_str(b, rm.standard);
    put_i64(b, rm.ncpus);
    for (int i = 0; i < rm.ncpus; i++) put_i32(b, rm.cpus[i]);
    put_i64(b, RM_NOPS);
    for (int i = 0; i < RM_NOPS; i++) put_str(b, OP_NAMES[i]);
    put_i64(b, rm.nphases);
    for (int i = 0; i < rm.nphases; i++) put_str(b, rm.phases[i].name);
    for (int k = 0; k < NKINDS; k++) {
        int64_t count = 0;
        for (int p = 0; p < rm.nphases; p++)
            for (int w = 0; w <= rm.size; w++) count += rm.phases[p].b[k][w] != 0.0 || rm.phases[p].m[k][w] != 0;
        put_i64(b, count);
        for (int field = 0; field < 4; field++)
            for (int p = 0; p < rm.nphases; p++) {
                const phase_t *ph = &rm.phases[p];
                for (int w = 0; w <= rm.size; w++) {
                    if (ph->b[k][w] == 0.0 && ph->m[k][w] == 0) continue;
                    if (field == 0) put_i32(b, p);
                    else if (field == 1) put_i32(b, w);
                    else if (field == 2) put_f64(b, ph->b[k][w]);
                    else put_i64(b, ph->m[k][w]);
                }
            }
    }
    put_i64(b, rm.ngroups);
    for (int i = 0; i < rm.ngroups; i++) {
        const group_t *g = &rm.groups[i];
        put_i32(b, g->inter); put_i32(b, g->me); put_i32(b, g->size);
        put(b, g->ranks, (size_t)g->size * sizeof(int32_t));
    }
    put_i64(b, rm.nevents);
    for (int i = 0; i < rm.nevents; i++) put_i32(b, rm.events[i].phase);
    for (int i = 0; i < rm.nevents; i++) put_i32(b, rm.events[i].group);
    for (int i = 0; i < rm.nevents; i++) put_i32(b, rm.events[i].op);
    for (int i = 0; i < rm.nevents; i++) put_i32(b, rm.events[i].root);
    for (int i = 0; i < rm.nevents; i++) put_f64(b, rm.events[i].unit);
    for (int i = 0; i < rm.nevents; i++) put_i64(b, rm.events[i].calls);
    put(b, "RMCEND\0\0", 8);
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* write a snapshot (when the counters changed since the last one, or
 * `force`); 1 when one was written */
static int snapshot(int status, int force) {
    buf_t b = {0};
    LOCK();
    if (!force && rm.gen == rm.written_gen) {
        UNLOCK();
        return 0;
    }
    serialize(&b, status);
    rm.written_gen = rm.gen;
    UNLOCK();
    size_t len = strlen(rm.counts_path);
    char *tmp = xalloc(len + 8);
    memcpy(tmp, rm.counts_path, len);
    memcpy(tmp + len, ".tmp", 5);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), ok = fd >= 0;
    if (ok) ok = write_all(fd, b.p, b.n) == 0;
    if (fd >= 0) ok = close(fd) == 0 && ok;
    if (ok) ok = rename(tmp, rm.counts_path) == 0;
    if (!ok && !rm.write_failed) {
        fprintf(stderr, "rankmap.profile: rank %d: cannot write %s: %s\n", rm.rank, tmp, strerror(errno));
        rm.write_failed = 1;
    }
    free(tmp);
    free(b.p);
    return ok;
}

static void tell(char what) {
    if (rm.sock >= 0 && send(rm.sock, &what, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EPIPE)
        rm.sock = -1;   /* the parent is gone */
}

static void *flush_loop(void *arg) {
    (void)arg;
    struct pollfd fds[2] = {{.fd = rm.stop_pipe[0], .events = POLLIN}, {.fd = rm.sock, .events = POLLIN}};
    for (;;) {
        int nfds = rm.sock >= 0 ? 2 : 1;
        int r = poll(fds, (nfds_t)nfds, rm.interval_ms > 0 ? rm.interval_ms : -1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || fds[0].revents) return NULL;
        if (r > 0) {   /* the parent asks for a snapshot now (it is about to pass on a signal) */
            char req[64];
            ssize_t k = recv(rm.sock, req, sizeof req, MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) rm.sock = -1;
            else if (k > 0 && memchr(req, 'R', (size_t)k) && snapshot(ST_FLUSHED, 1)) tell('F');
            continue;
        }
        tell(snapshot(ST_FLUSHED, 0) ? 'F' : 'T');
    }
}

/* ---------------------------------------------------------- begin and end */
static void finish(int status) {
    if (rm.finished) return;
    rm.finished = 1;
    rm_recording = 0;
    if (rm.flusher_running) {
        if (write(rm.stop_pipe[1], "x", 1) < 0) { /* the thread ends at its next wake-up */ }
        pthread_join(rm.flusher, NULL);
        rm.flusher_running = 0;
    }
    snapshot(status, 1);
    tell('E');
}

static int at_finalize(MPI_Comm comm, int keyval, void *val, void *extra) {
    (void)comm; (void)keyval; (void)val; (void)extra;
    finish(ST_FINALIZED);
    return MPI_SUCCESS;
}

static void at_exit(void) {
    if (rm_recording && getpid() == rm.pid) finish(ST_EXITED);
}

static void mpi_identity(void) {
    int len, major, minor;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    PMPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\r\n")] = 0;
    snprintf(rm.library, sizeof rm.library, "%.255s", lib);
    PMPI_Get_version(&major, &minor);
    snprintf(rm.standard, sizeof rm.standard, "%d.%d", major, minor);
}

static void binding(void) {
    for (int n = 1024;; n *= 2) {
        cpu_set_t *set = CPU_ALLOC(n);
        size_t size = CPU_ALLOC_SIZE(n);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0) {
            rm.cpus = xalloc((size_t)n * sizeof(int));
            for (int c = 0; c < n; c++)
                if (CPU_ISSET_S(c, size, set)) rm.cpus[rm.ncpus++] = c;
            CPU_FREE(set);
            return;
        }
        CPU_FREE(set);
        if (errno != EINVAL || n > (1 << 20)) return;
    }
}

/* wait for the parent's acknowledgement that this rank's part file exists */
static void handshake(void) {
    if (rm.sock < 0) return;
    tell('S');
    struct pollfd p = {.fd = rm.sock, .events = POLLIN};
    char ack;
    while (poll(&p, 1, 120000) < 0 && errno == EINTR) {}
    if (!(p.revents & POLLIN) || recv(rm.sock, &ack, 1, 0) != 1) rm.sock = -1;
}

void rm_begin(void) {
    const char *path = getenv("RANKMAP_PMPI_COUNTS"), *text;
    int initialized = 0;
    if (rm.begun || !path) return;
    PMPI_Initialized(&initialized);
    if (!initialized) return;
    rm.begun = 1;
    rm.pid = getpid();
    rm.t_start = now();
    rm.counts_path = strdup(path);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rm.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &rm.size);
    PMPI_Comm_group(MPI_COMM_WORLD, &rm.world_group);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_gone, &rm.comm_key, NULL);
    PMPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_gone, &rm.win_key, NULL);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &rm.end_key, NULL);
    MPI_Comm node;   /* one rank per host records the host's machine tree */
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int node_rank;
    PMPI_Comm_rank(node, &node_rank);
    PMPI_Comm_free(&node);
    rm.leader = node_rank == 0;
    gethostname(rm.host, sizeof rm.host - 1);
    mpi_identity();
    binding();
    text = getenv("RANKMAP_PMPI_MODEL");
    rm.model = !text ? M_TREE : !strcmp(text, "none") ? M_NONE : !strcmp(text, "root") ? M_ROOT
             : !strcmp(text, "ring") ? M_RING : M_TREE;
    text = getenv("RANKMAP_PMPI_INTERVAL");
    rm.interval_ms = text ? (int)(1000.0 * atof(text) + 0.5) : 1000;
    text = getenv("RANKMAP_PMPI_SOCKET");
    rm.sock = text ? atoi(text) : -1;
    if (rm.sock >= 0) fcntl(rm.sock, F_SETFD, FD_CLOEXEC);   /* not for the program's children */
    LOCK();   /* as the mpi4py profiler: "main", then the starting phase, then paused */
    rm.phase_name = strdup("main");
    rm.pcontrol_base = strdup("main");
    set_phase("main");
    text = getenv("RANKMAP_PMPI_PHASE");
    if (text && *text) set_phase(text);
    text = getenv("RANKMAP_PMPI_PAUSED");
    if (text && !strcmp(text, "1")) set_paused(1);
    UNLOCK();
    unsetenv("RANKMAP_PMPI_COUNTS");   /* a process the program starts records nothing into this rank */
    unsetenv("RANKMAP_PMPI_SOCKET");
    snapshot(ST_STARTED, 1);
    handshake();
    PMPI_Barrier(MPI_COMM_WORLD);   /* every rank has its part file before the program goes on */
    PMPI_Comm_set_attr(MPI_COMM_SELF, rm.end_key, NULL);   /* MPI_Finalize deletes it first */
    if (pipe(rm.stop_pipe) == 0) {
        fcntl(rm.stop_pipe[0], F_SETFD, FD_CLOEXEC);
        fcntl(rm.stop_pipe[1], F_SETFD, FD_CLOEXEC);
        rm.flusher_running = pthread_create(&rm.flusher, NULL, flush_loop, NULL) == 0;
    }
    atexit(at_exit);
    rm_recording = 1;
}

/* ------------------------------------------- the calls written by hand */
int MPI_Init(int *argc, char ***argv) {
    rm_depth++;
    int rc = PMPI_Init(argc, argv);
    rm_depth--;
    if (rc == MPI_SUCCESS) rm_begin();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    rm_depth++;
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    rm_depth--;
    if (rc == MPI_SUCCESS) rm_begin();
    return rc;
}

int MPI_Pcontrol(const int level, ...) {
    if (rm_on()) rm_pcontrol(level);
    return PMPI_Pcontrol(level);
}
