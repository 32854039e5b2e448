/* rankmap's PMPI interposition library: counters, communicator tables,
 * the event log, snapshots.  The wrappers of the MPI calls are generated
 * next to this file (rankmap/profile/native/calls.py) and call the rm_*
 * functions here.
 *
 * What a rank sent is kept as dense rows indexed by COMM_WORLD rank (index
 * world_size: processes outside COMM_WORLD), per phase and kind (p2p, exact
 * collective sends, one-sided put, one-sided get), plus collective events
 * (phase, group, operation, root) -> (sum of unit bytes, calls) that the
 * Python side turns into pairs with rankmap's collective models.  A group
 * is a communicator's members as COMM_WORLD ranks (the remote group of an
 * intercommunicator), kept once however many communicators share it.
 *
 * The event log holds the rank's posts, waits and collectives in program
 * order, as the mpi4py profiler logs them (rankmap/profile/eventlog.py):
 * records in one array allocated at the start, `cap` of them (the
 * parent's --max-events); at the cap the log stops (`truncated`) and the
 * counters go on.  A record is one event of the trace, except a collective
 * with a model: one record that the Python side expands, with the same
 * models, into the collective and this rank's flows.  Requests whose
 * completion the log waits for are tracked by handle; a receive from
 * MPI_ANY_SOURCE is logged from peer -1 and fixed (source, size) when it
 * completes.  Snapshots append only the records and fixes logged since the
 * last one to the events file (COUNTS.events).
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
 * parent answers 'A' and the event log's cap, i64, once its part file
 * exists), 'F' written, 'T' nothing new, 'E' the final snapshot
 * (MPI_Finalize, or exit without it).  The parent may ask for a snapshot
 * now with 'R'.
 *
 * Snapshot layout (host byte order; str = i64 length + bytes):
 *   "RMCOUNTS" u32 version u32 status(0 started 1 flushed 2 finalized 3 exited)
 *   i64 rank, size, node_leader, pid   f64 t_start, t_end
 *   str host, mpi_library, mpi_standard   i64 ncpus  i32 cpus[ncpus]
 *   i64 nops  str op[nops]   i64 nphases  str phase[nphases]
 *   4 x (kind p2p, collective, put, get): i64 k  i32 phase[k] i32 peer[k] f64 bytes[k] i64 msgs[k]
 *   i64 ngroups, per group: i32 inter, me, size, ranks[size]
 *   i64 nevents  i32 phase[] group[] op[] root[]  f64 unit[]  i64 calls[]
 *   i64 cap, truncated, log_bytes, log_records   (the events file up to
 *       log_bytes holds the first log_records records)
 *   "RMCEND\0\0"
 * Events file: chunks of "RMEVENTS" i64 first, nrec, nfix, rec_t[nrec],
 *   nfix x (i64 record, peer, bytes).
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SNAPSHOT_VERSION 2
enum { ST_STARTED, ST_FLUSHED, ST_FINALIZED, ST_EXITED };
enum { K_P2P, K_COLL, K_PUT, K_GET, NKINDS };
enum { M_NONE, M_ROOT, M_TREE, M_RING, M_MPI };
static const char *const OP_NAMES[RM_NOPS] = {
    "bcast", "reduce", "scatter", "gather", "allgather", "allreduce", "alltoall",
    "reduce_scatter", "scan", "barrier"};

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
/* nbr: world rank or -1; members: the event log's group (-1 not logged, -2 not looked up yet) */
typedef struct { int group, members; int nbr_ready, nnbr; int *nbr; } comm_t;
typedef struct { int kind, world; double bytes; } send_t;
/* what a persistent request does at each MPI_Start: counter rows, a
 * modelled collective's event, and what the event log gets: `post` -1
 * nothing, R_SEND/R_RECV a post to `peer` of `bytes` (fix: the group of an
 * ANY_SOURCE receive), R_COLL the collective on group `coll` and its flows */
typedef struct {
    int nsend; send_t *send; int has_event, group, op, root; double unit;
    int post, peer, fix, coll; int64_t bytes;
} plan_t;

/* ---------------------------------------------------------- the event log */
/* rankmap.trace's EVENT_* (SEND, RECV, WAIT, COLL, CSEND), and a collective
 * with a model, which the Python side expands into a COLL and its flows */
enum { R_SEND, R_RECV, R_WAIT, R_COLL, R_CSEND, R_MODEL };
typedef struct {
    int8_t kind, op;     /* op: R_MODEL's operation */
    int16_t unused;
    int32_t peer;        /* SEND/RECV/CSEND: world rank (RECV -1: from MPI_ANY_SOURCE, not completed);
                          * R_MODEL: the group its plan addresses */
    int32_t root;        /* R_MODEL: the root (-2: MPI_ROOT of an intercommunicator) */
    int32_t members;     /* COLL, R_MODEL: the group of the communicator's world ranks */
    int64_t value;       /* SEND/RECV/CSEND: bytes; WAIT: the record of its post; R_MODEL: unit bytes (a double) */
} rec_t;
_Static_assert(sizeof(rec_t) == 24, "an event record is 24 bytes (rankmap/profile/native/events.py)");
typedef struct { int64_t record, peer, bytes; } fix_t;   /* an ANY_SOURCE receive, completed */
/* a request the program may complete: its handle (`key`), where the program
 * kept it (`slot`), its order among the tracked ones (`seq`), the record of
 * its post (-1: none the log waits for) and the next one (`two`: an
 * Isendrecv's receive), the group of an ANY_SOURCE receive to fix when it
 * completes (-1: none).  Several may share a handle: MPIs give one to
 * requests that complete at once (eager sends, MPI_PROC_NULL). */
typedef struct { uint64_t key, slot, seq; int64_t post; int32_t group; uint8_t two, state; } track_t;

static struct {
    rec_t *rec; int64_t cap, n; int truncated;
    fix_t *fix; int64_t nfix, fix_cap;
    track_t *track; size_t track_cap, track_used, track_filled; int64_t live; uint64_t seq;
    int32_t coll;        /* a collective's group whose COLL is not logged yet (-1: none) */
    int fd;              /* the events file: file_bytes hold the first file_records records, file_fixes fixes */
    int64_t file_bytes, file_records, file_fixes;
} lg = {.coll = -1, .fd = -1};

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
        c->members = -2;
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

/* ------------------------------------------------------------- event log */
/* Everything here runs under the lock, but for the reads the hot paths make
 * first to skip it (lg.cap, lg.live, rm.active: set before recording starts,
 * or a hint that the locked code checks again). */

/* tracked requests: open addressing over the handle's bits, tombstones on
 * delete; a handle may be there more than once */
static void track_insert(track_t t);

static void track_rehash(size_t cap) {
    track_t *old = lg.track;
    size_t n = lg.track_cap;
    lg.track = xalloc(cap * sizeof(track_t));
    lg.track_cap = cap;
    lg.track_used = lg.track_filled = 0;
    for (size_t i = 0; i < n; i++)
        if (old[i].state == 1) track_insert(old[i]);
    free(old);
}

static void track_insert(track_t t) {
    if (2 * (lg.track_filled + 1) > lg.track_cap)
        track_rehash(lg.track_cap ? (lg.track_used * 4 > lg.track_cap ? 2 * lg.track_cap : lg.track_cap) : 64);
    size_t mask = lg.track_cap - 1, i = mix(t.key) & mask;
    while (lg.track[i].state == 1) i = (i + 1) & mask;
    if (lg.track[i].state == 0) lg.track_filled++;
    t.state = 1;
    lg.track[i] = t;
    lg.track_used++;
    __atomic_store_n(&lg.live, (int64_t)lg.track_used, __ATOMIC_RELAXED);
}

/* remove a request with handle `key`: the first tracked of those kept at
 * `slot`, else the first tracked; 1 (and it in `out`) when there was one */
static int track_take(uint64_t key, uint64_t slot, track_t *out) {
    if (!lg.track_cap) return 0;
    size_t mask = lg.track_cap - 1, best = (size_t)-1;
    int best_here = 0;
    for (size_t i = mix(key) & mask; lg.track[i].state; i = (i + 1) & mask) {
        const track_t *t = &lg.track[i];
        if (t->state != 1 || t->key != key) continue;
        int here = t->slot == slot;
        if (best == (size_t)-1 || here > best_here || (here == best_here && t->seq < lg.track[best].seq)) {
            best = i;
            best_here = here;
        }
    }
    if (best == (size_t)-1) return 0;
    *out = lg.track[best];
    lg.track[best].state = 2;
    lg.track_used--;
    __atomic_store_n(&lg.live, (int64_t)lg.track_used, __ATOMIC_RELAXED);
    return 1;
}

/* a request the program got (`post` -1: one the log waits for nothing of);
 * none once the log is full: no wait can be logged */
static void track(rm_req r, int64_t post, int32_t group, int two) {
    if (!r.handle || !lg.cap || (lg.n >= lg.cap && (post < 0 || group < 0))) return;   /* but a receive to fix */
    track_insert((track_t){handle_key(r.handle, sizeof *r.handle), (uint64_t)(uintptr_t)r.slot, lg.seq++,
                           post, group, (uint8_t)two, 1});
}

/* append a record; its index, or -1: no log, paused, or the log is full (truncated) */
static int64_t log_put(rec_t r) {
    if (!lg.cap || rm.active < 0) return -1;
    if (lg.n >= lg.cap) {
        if (!lg.truncated) rm.gen++;
        lg.truncated = 1;
        return -1;
    }
    lg.rec[lg.n] = r;
    rm.gen++;
    return lg.n++;
}

static int64_t log_rec(int kind, int32_t peer, int64_t value) {
    return log_put((rec_t){.kind = (int8_t)kind, .peer = peer, .value = value});
}

/* the COLL of the collective being recorded, when no record named it yet */
static void coll_flush(void) {
    if (lg.coll >= 0) log_put((rec_t){.kind = R_COLL, .members = lg.coll});
    lg.coll = -1;
}

static void log_model(int32_t members, int32_t plan_group, int op, int root, double unit) {
    rec_t r = {.kind = R_MODEL, .op = (int8_t)op, .peer = plan_group, .root = root, .members = members};
    memcpy(&r.value, &unit, sizeof unit);
    log_put(r);
}

static void fix_add(int64_t record, int32_t peer, int64_t bytes) {
    if (lg.nfix == lg.fix_cap) {
        lg.fix_cap = lg.fix_cap ? 2 * lg.fix_cap : 256;
        lg.fix = xgrow(lg.fix, (size_t)lg.fix_cap * sizeof(fix_t));
    }
    lg.fix[lg.nfix++] = (fix_t){record, peer, bytes};
    rm.gen++;
}

/* the event log's group of a communicator: its world ranks (an
 * intercommunicator's two groups, the one holding the lower world rank
 * first, as the mpi4py profiler names it); -1 when a member is outside
 * COMM_WORLD or there is no log */
static int log_members(MPI_Comm comm, comm_t *c) {
    if (c->members != -2) return c->members;
    int gid = c->group;
    if (!lg.cap) gid = -1;
    else if (rm.groups[gid].inter) {
        MPI_Group local;
        PMPI_Comm_group(comm, &local);
        int l = group_of(local, 0, -1);
        PMPI_Group_free(&local);
        const group_t *a = &rm.groups[l], *b = &rm.groups[c->group];
        int amin = rm.size, bmin = rm.size;
        for (int i = 0; i < a->size; i++) amin = a->ranks[i] < amin ? a->ranks[i] : amin;
        for (int i = 0; i < b->size; i++) bmin = b->ranks[i] < bmin ? b->ranks[i] : bmin;
        if (bmin < amin) {
            const group_t *t = a;
            a = b;
            b = t;
        }
        int *ranks = xalloc((size_t)(a->size + b->size) * sizeof(int));
        memcpy(ranks, a->ranks, (size_t)a->size * sizeof(int));
        memcpy(ranks + a->size, b->ranks, (size_t)b->size * sizeof(int));
        gid = group_intern(2, -1, a->size + b->size, ranks);
    }
    if (gid >= 0)
        for (int i = 0; i < rm.groups[gid].size; i++)
            if (rm.groups[gid].ranks[i] >= rm.size) gid = -1;
    return c->members = gid;
}

/* ---------------------------------------------------------------- statuses */
#ifdef RM_FORTRAN
#ifndef MPI_F_STATUS_SIZE
#define MPI_F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif
#define STATUS_BYTES (sizeof(MPI_Status) > MPI_F_STATUS_SIZE * sizeof(MPI_Fint) ? sizeof(MPI_Status) \
                      : MPI_F_STATUS_SIZE * sizeof(MPI_Fint))   /* room for one, C or Fortran */
#else
#define STATUS_BYTES sizeof(MPI_Status)
#endif

/* per thread: the requests a completion call claimed, statuses of the
 * library's own, which status belongs to which request */
typedef struct { int index; track_t t; } claim_t;
static __thread struct {
    claim_t *c; int n, cap, count;
    int *where; int where_cap;
    void *st; size_t st_bytes;
} cl __attribute__((tls_model("initial-exec")));

static int ignored(const void *p, int fortran) {
#ifdef RM_FORTRAN
    if (fortran) return p == (const void *)MPI_F_STATUS_IGNORE || p == (const void *)MPI_F_STATUSES_IGNORE;
#endif
    (void)fortran;
    return p == (const void *)MPI_STATUS_IGNORE || p == (const void *)MPI_STATUSES_IGNORE;
}

/* the program ignores the statuses of `count` requests: point the call at ours */
static void want_statuses(rm_status st, int count) {
    if (!st.slot || !ignored(*st.slot, st.fortran)) return;
    size_t need = (size_t)(count > 0 ? count : 1) * STATUS_BYTES;
    if (cl.st_bytes < need) {
        cl.st = xgrow(cl.st, need);
        cl.st_bytes = need;
    }
    *st.slot = cl.st;
}

void rm_want_status(int source, rm_status st) {
    if (source == MPI_ANY_SOURCE && lg.cap && rm.active >= 0) want_statuses(st, 1);
}

/* the source (world rank; -1 outside COMM_WORLD) and bytes of the j-th status
 * of `st`, for a receive on a communicator whose peers are group `g`; 0 when
 * there is no status to read */
static int status_of(rm_status st, int j, const group_t *g, int32_t *peer, int64_t *bytes) {
    if (!st.slot || ignored(*st.slot, st.fortran)) return 0;
    const MPI_Status *s = (const MPI_Status *)*st.slot + j;
#ifdef RM_FORTRAN
    MPI_Status c;
    if (st.fortran) {
        PMPI_Status_f2c((const MPI_Fint *)*st.slot + (size_t)j * MPI_F_STATUS_SIZE, &c);
        s = &c;
    }
#endif
    MPI_Count n = 0;
    PMPI_Get_elements_x(s, MPI_BYTE, &n);
    int src = s->MPI_SOURCE;
    *peer = src >= 0 && src < g->size && g->ranks[src] < rm.size ? g->ranks[src] : -1;
    *bytes = n;
    return 1;
}

static MPI_Request request_at(rm_handles h, int i) {
    i *= h.step;
#ifdef RM_FORTRAN
    if (h.fortran) return PMPI_Request_f2c(((const MPI_Fint *)h.p)[i]);
#endif
    return ((const MPI_Request *)h.p)[i];
}

/* where the program keeps request i */
static const void *request_slot(rm_handles h, int i) {
    i *= h.step;
#ifdef RM_FORTRAN
    if (h.fortran) return (const MPI_Fint *)h.p + i;
#endif
    return (const MPI_Request *)h.p + i;
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

/* enter/leave a recording function: the lock, and a plan for a persistent
 * call; a collective that logged no record (a barrier, no flows) logs its
 * COLL on leaving */
static void enter(MPI_Request *persist) {
    LOCK();
    rm.building = NULL;
    if (persist) {
        rm.building = xalloc(sizeof(plan_t));
        rm.building->post = -1;
    }
}

static void leave(MPI_Request *persist) {
    if (persist) {
        uint64_t key = handle_key(persist, sizeof *persist);
        plan_free(map_del(&rm.plans, key));
        map_put(&rm.plans, key, rm.building);
        rm.building = NULL;
    } else {
        coll_flush();
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

/* ---------------------------------------------------------- point-to-point */
/* a send or receive post to world rank `peer` (-1: from ANY_SOURCE, `fix`
 * its group) that completes as `mode` says */
static void post(int kind, int32_t peer, int64_t bytes, int mode, rm_req request, int32_t fix) {
    if (mode == RM_PERSISTENT) {
        plan_t *p = rm.building;
        p->post = kind; p->peer = peer; p->bytes = bytes; p->fix = fix;
        return;
    }
    int64_t i = log_rec(kind, peer, bytes);
    if (mode == RM_BLOCKING) {
        if (i >= 0) log_rec(R_WAIT, 0, i);
    } else {
        track(request, mode == RM_NONBLOCKING ? i : -1, i >= 0 ? fix : -1, 0);
    }
}

/* a request the log waits for nothing of (outside a recording function) */
void rm_untracked(rm_req request) {
    if (!lg.cap || !request.handle) return;
    LOCK();
    track(request, -1, -1, 0);
    UNLOCK();
}

/* world rank of comm rank q (addressing group g) for the log; -1 outside COMM_WORLD */
static int32_t log_peer(const group_t *g, int q) {
    return q >= 0 && q < g->size && g->ranks[q] < rm.size ? g->ranks[q] : -1;
}

void rm_p2p(MPI_Comm comm, int dest, MPI_Count count, MPI_Datatype type, int mode, rm_req request) {
    if (dest < 0) {   /* MPI_PROC_NULL */
        if (mode != RM_PERSISTENT) rm_untracked(request);
        return;
    }
    double bytes = type_bytes(count, type);
    MPI_Request *persist = mode == RM_PERSISTENT ? request.handle : NULL;
    enter(persist);
    const comm_t *c = comm_entry(comm);   /* may grow rm.groups */
    const group_t *g = &rm.groups[c->group];
    int world = dest < g->size ? g->ranks[dest] : rm.size;
    if (dest < g->size) emit_row(K_P2P, world, bytes);
    if (world < rm.size) post(R_SEND, world, (int64_t)bytes, mode, request, -1);
    else if (mode != RM_PERSISTENT) track(request, -1, -1, 0);
    leave(persist);
}

/* a named source's post; from ANY_SOURCE: a blocking receive's source and
 * size from its status, a nonblocking or persistent one's at completion */
void rm_recv(MPI_Comm comm, int source, MPI_Count count, MPI_Datatype type, int mode, rm_req request,
             rm_status st) {
    if (!lg.cap || (mode == RM_BLOCKING && rm.active < 0)) return;
    if (source == MPI_PROC_NULL) {
        if (mode != RM_PERSISTENT) rm_untracked(request);
        return;
    }
    int any = source == MPI_ANY_SOURCE;
    double bytes = any && mode == RM_BLOCKING ? 0.0 : type_bytes(count, type);
    MPI_Request *persist = mode == RM_PERSISTENT ? request.handle : NULL;
    enter(persist);
    comm_t *c = comm_entry(comm);
    const group_t *g = &rm.groups[c->group];
    int32_t peer = any ? -1 : log_peer(g, source), fix = -1;
    int64_t n = (int64_t)bytes;
    if (any && mode == RM_BLOCKING && !status_of(st, 0, g, &peer, &n)) peer = -1;
    if (any && mode != RM_BLOCKING) fix = c->group;   /* its source: at completion */
    if (peer >= 0 || fix >= 0) post(R_RECV, peer, n, mode, request, fix);
    else if (mode == RM_NONBLOCKING) track(request, -1, -1, 0);   /* a peer outside COMM_WORLD */
    leave(persist);
}

/* both posts, then (blocking) the waits for both, or (Isendrecv) one request
 * that waits for both */
void rm_sendrecv(MPI_Comm comm, int dest, MPI_Count scount, MPI_Datatype stype, int source, MPI_Count rcount,
                 MPI_Datatype rtype, rm_req request, rm_status st) {
    if (!lg.cap) {   /* no log: the send is all there is */
        rm_p2p(comm, dest, scount, stype, RM_BLOCKING, RM_NO_REQ);
        return;
    }
    int any = source == MPI_ANY_SOURCE;
    double sbytes = dest >= 0 ? type_bytes(scount, stype) : 0.0;
    double rbytes = source != MPI_PROC_NULL && !(any && !request.handle) ? type_bytes(rcount, rtype) : 0.0;
    enter(NULL);
    comm_t *c = comm_entry(comm);
    const group_t *g = &rm.groups[c->group];
    int64_t s = -1, r = -1;
    if (dest >= 0 && dest < g->size) {
        emit_row(K_P2P, g->ranks[dest], sbytes);
        if (g->ranks[dest] < rm.size) s = log_rec(R_SEND, g->ranks[dest], (int64_t)sbytes);
    }
    int32_t peer, fix = -1;
    int64_t n = (int64_t)rbytes;
    if (source == MPI_PROC_NULL) {
        /* nothing to receive */
    } else if (!any) {
        peer = log_peer(g, source);
        if (peer >= 0) r = log_rec(R_RECV, peer, n);
    } else if (request.handle) {
        r = log_rec(R_RECV, -1, n);
        fix = c->group;
    } else if (status_of(st, 0, g, &peer, &n) && peer >= 0) {
        r = log_rec(R_RECV, peer, n);
    }
    if (request.handle) {
        if (r >= 0) track(request, s >= 0 ? s : r, fix, s >= 0);
        else track(request, s, -1, 0);
    } else {
        if (s >= 0) log_rec(R_WAIT, 0, s);
        if (r >= 0) log_rec(R_WAIT, 0, r);
    }
    leave(NULL);
}

void rm_start(rm_handles requests, int count) {
    LOCK();
    for (int i = 0; i < count; i++) {
        MPI_Request r = request_at(requests, i);
        plan_t *p = map_get(&rm.plans, handle_key(&r, sizeof r));
        if (!p) continue;   /* a request the program made before recording, or one the log cannot name */
        for (int s = 0; s < p->nsend; s++) emit_row(p->send[s].kind, p->send[s].world, p->send[s].bytes);
        if (p->has_event) emit_event(p->group, p->op, p->root, p->unit);
        if (p->post == R_SEND || p->post == R_RECV) {
            int64_t k = log_rec(p->post, p->peer, p->bytes);
            track((rm_req){&r, request_slot(requests, i)}, k, k >= 0 ? p->fix : -1, 0);
        } else if (p->post == R_COLL && p->coll >= 0) {
            if (p->has_event) {
                log_model(p->coll, p->group, p->op, p->root, p->unit);
            } else {
                log_put((rec_t){.kind = R_COLL, .members = p->coll});
                for (int s = 0; s < p->nsend; s++)
                    log_rec(R_CSEND, p->send[s].world, (int64_t)(p->send[s].bytes + 0.5));
            }
        }
    }
    UNLOCK();
}

void rm_forget(rm_handles request) {
    MPI_Request r = request_at(request, 0);
    uint64_t key = handle_key(&r, sizeof r);
    track_t t;
    LOCK();
    plan_free(map_del(&rm.plans, key));
    track_take(key, (uint64_t)(uintptr_t)request_slot(request, 0), &t);
    UNLOCK();
}

/* ------------------------------------------------------------- completion */
/* the waits for a request's posts */
static void log_waits(const track_t *t) {
    log_rec(R_WAIT, 0, t->post);
    if (t->two) log_rec(R_WAIT, 0, t->post + 1);
}

/* Before a completion call: take the requests it names out of the tracked
 * ones (another thread may reuse a handle once it completed), and give the
 * call statuses when one is an ANY_SOURCE receive the program ignores the
 * status of.  After it: the completed ones' fixes and waits, in the order of
 * the requests; the others are tracked again. */
void rm_claim(rm_handles requests, int count, rm_status st) {
    cl.n = 0;
    if (count <= 0 || !__atomic_load_n(&lg.live, __ATOMIC_RELAXED)) return;
    if (cl.cap < count) {
        cl.cap = count;
        cl.c = xgrow(cl.c, (size_t)count * sizeof(claim_t));
    }
    cl.count = count;
    int fix = 0;
    LOCK();
    for (int i = 0; i < count; i++) {
        MPI_Request r = request_at(requests, i);
        claim_t *k = &cl.c[cl.n];
        if (track_take(handle_key(&r, sizeof r), (uint64_t)(uintptr_t)request_slot(requests, i), &k->t)) {
            k->index = i;
            fix |= k->t.group >= 0;
            cl.n++;
        }
    }
    UNLOCK();
    if (fix) want_statuses(st, count);
}

void rm_done(int n, const int *which, int base, rm_status st) {
    if (!cl.n) return;
    if (which) {   /* the status of request i: which[j] - base == i */
        if (cl.where_cap < cl.count) {
            cl.where_cap = cl.count;
            cl.where = xgrow(cl.where, (size_t)cl.count * sizeof(int));
        }
        for (int k = 0; k < cl.n; k++) cl.where[cl.c[k].index] = -1;
        for (int j = 0; j < n; j++)
            if (which[j] - base >= 0 && which[j] - base < cl.count) cl.where[which[j] - base] = j;
    }
    LOCK();
    for (int k = 0; k < cl.n; k++) {
        const track_t *t = &cl.c[k].t;
        int i = cl.c[k].index, j = which ? cl.where[i] : i < n ? i : -1;
        if (j < 0) {
            track_insert(*t);
            continue;
        }
        if (t->post < 0) continue;
        int32_t peer;
        int64_t bytes;
        if (t->group >= 0 && status_of(st, j, &rm.groups[t->group], &peer, &bytes))
            fix_add(t->post + t->two, peer, bytes);
        log_waits(t);
    }
    UNLOCK();
    cl.n = 0;
}

/* ------------------------------------------------------------ collectives */
/* A recording function holds the lock from `collective` to `leave`; the
 * communicator's group says inter or intra, this rank's rank, the peers.
 * The event log gets a COLL naming the communicator's world ranks, or one
 * record for a modelled collective, then this rank's exact flows. */
static const group_t *collective(MPI_Comm comm, MPI_Request *persist, int *gid) {
    enter(persist);
    comm_t *c = comm_entry(comm);
    int members = log_members(comm, c);
    *gid = c->group;
    if (persist) {
        rm.building->post = R_COLL;
        rm.building->coll = members;
    } else {
        lg.coll = members;
    }
    return &rm.groups[*gid];
}

/* something to do: counters under a model, or a log */
static int collectives_wanted(void) { return rm.model != M_NONE || lg.cap; }

/* one collective with a model: `unit` bytes of operation `op` at `root`
 * (intercommunicators: MPI_ROOT is -2, MPI_PROC_NULL sends nothing) */
static void event(int gid, const group_t *g, int op, int root, double unit) {
    if (rm.model == M_NONE || (g->inter && root == MPI_PROC_NULL)) return;
    root = g->inter && root == MPI_ROOT ? -2 : root;
    emit_event(gid, op, root, unit);
    if (!rm.building && lg.coll >= 0) {
        log_model(lg.coll, gid, op, root, unit);
        lg.coll = -1;
    }
}

static int is_root(const group_t *g, int root) { return g->inter ? root == MPI_ROOT : root == g->me; }

/* an exact flow to world rank `world` */
static void flow(int world, double bytes) {
    emit_row(K_COLL, world, bytes);
    if (!rm.building) {
        coll_flush();
        log_rec(R_CSEND, world, (int64_t)(bytes + 0.5));
    }
}

/* an exact send to comm rank q (none to itself, none of 0 bytes) */
static void exact(const group_t *g, int q, double bytes) {
    if (rm.model != M_NONE && bytes != 0.0 && q != g->me) flow(g->ranks[q], bytes);
}

void rm_vector(MPI_Comm comm, int op, MPI_Count count, MPI_Datatype type, int root,
               MPI_Request *persist) {
    if (!collectives_wanted()) return;
    double unit = type_bytes(count, type);
    int gid;
    const group_t *g = collective(comm, persist, &gid);
    event(gid, g, op, root, unit);
    leave(persist);
}

void rm_rooted(MPI_Comm comm, int op, int root, MPI_Count root_count, MPI_Datatype root_type,
               MPI_Count count, MPI_Datatype type, MPI_Request *persist) {
    if (!collectives_wanted()) return;
    int gid;
    const group_t *g = collective(comm, persist, &gid);
    event(gid, g, op, root, is_root(g, root) ? type_bytes(root_count, root_type) : type_bytes(count, type));
    leave(persist);
}

void rm_scatterv(MPI_Comm comm, rm_counts scounts, MPI_Datatype stype, MPI_Count rcount,
                 MPI_Datatype rtype, int root, MPI_Request *persist) {
    if (!collectives_wanted()) return;
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
    if (!collectives_wanted()) return;
    int gid;
    const group_t *g = collective(comm, persist, &gid);   /* the own block, in place or not */
    event(gid, g, RM_ALLGATHER, 0, g->inter ? type_bytes(scount, stype) : type_bytes(count_at(rcounts, g->me), rtype));
    leave(persist);
}

void rm_reduce_scatter(MPI_Comm comm, rm_counts rcounts, MPI_Datatype type, MPI_Request *persist) {
    if (!collectives_wanted()) return;
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
    if (!collectives_wanted()) return;
    int gid;
    const group_t *g = collective(comm, persist, &gid);
    for (int q = 0; q < g->size && rm.model != M_NONE; q++)
        exact(g, q, in_place ? type_bytes(count_at(rcounts, q), handle_type(rtypes, q))
                             : type_bytes(count_at(scounts, q), handle_type(stypes, q)));
    leave(persist);
}

/* neighbourhood collectives: block j to out-neighbour j */
void rm_neighbors(MPI_Comm comm, rm_counts scounts, rm_handles stypes, MPI_Request *persist) {
    if (!collectives_wanted()) return;
    int gid;
    collective(comm, persist, &gid);
    comm_t *c = comm_entry(comm);
    if (!c->nbr_ready) neighbours(comm, c);
    for (int j = 0; j < c->nnbr && rm.model != M_NONE; j++)
        if (c->nbr[j] >= 0)   /* not MPI_PROC_NULL at a non-periodic edge */
            flow(c->nbr[j], type_bytes(count_at(scounts, j), handle_type(stypes, j)));
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

/* the counters as bytes, up to the event log's part (under the lock) */
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

static void complain(const char *path) {
    if (!rm.write_failed)
        fprintf(stderr, "rankmap.profile: rank %d: cannot write %s: %s\n", rm.rank, path, strerror(errno));
    rm.write_failed = 1;
}

static int pwrite_all(int fd, const void *p, size_t n, off_t at) {
    while (n) {
        ssize_t k = pwrite(fd, p, n, at);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p = (const char *)p + k;
        n -= (size_t)k;
        at += k;
    }
    return 0;
}

/* append the records [file_records, n) and the fixes `fixes` to the events
 * file (records are never rewritten once logged: read without the lock);
 * a failed write is written over by the next one */
static void append_events(int64_t n, const buf_t *fixes, int64_t nfix) {
    if (lg.fd < 0 || (n == lg.file_records && !nfix)) return;
    int64_t head[3] = {lg.file_records, n - lg.file_records, nfix};
    size_t records = (size_t)(n - lg.file_records) * sizeof(rec_t);
    off_t at = (off_t)lg.file_bytes;
    int ok = pwrite_all(lg.fd, "RMEVENTS", 8, at) == 0 && pwrite_all(lg.fd, head, sizeof head, at + 8) == 0 &&
             pwrite_all(lg.fd, lg.rec + lg.file_records, records, at + 8 + (off_t)sizeof head) == 0 &&
             pwrite_all(lg.fd, fixes->p, fixes->n, at + 8 + (off_t)(sizeof head + records)) == 0;
    if (!ok) {
        char path[4200];
        snprintf(path, sizeof path, "%s.events", rm.counts_path);
        complain(path);
        return;
    }
    lg.file_bytes += 8 + (int64_t)(sizeof head + records + fixes->n);
    lg.file_records = n;
    lg.file_fixes += nfix;
}

/* write a snapshot (when the counters or the log changed since the last
 * one, or `force`): the events logged since the last one go to the events
 * file first, then the snapshot that covers them; 1 when one was written */
static int snapshot(int status, int force) {
    buf_t b = {0}, fixes = {0};
    LOCK();
    if (!force && rm.gen == rm.written_gen) {
        UNLOCK();
        return 0;
    }
    serialize(&b, status);
    int64_t n = lg.n, nfix = lg.nfix - lg.file_fixes;
    if (nfix) put(&fixes, lg.fix + lg.file_fixes, (size_t)nfix * sizeof(fix_t));
    int64_t truncated = lg.truncated;
    rm.written_gen = rm.gen;
    UNLOCK();
    append_events(n, &fixes, nfix);
    free(fixes.p);
    put_i64(&b, lg.cap); put_i64(&b, truncated); put_i64(&b, lg.file_bytes); put_i64(&b, lg.file_records);
    put(&b, "RMCEND\0\0", 8);
    size_t len = strlen(rm.counts_path);
    char *tmp = xalloc(len + 8);
    memcpy(tmp, rm.counts_path, len);
    memcpy(tmp + len, ".tmp", 5);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), ok = fd >= 0;
    if (ok) ok = write_all(fd, b.p, b.n) == 0;
    if (fd >= 0) ok = close(fd) == 0 && ok;
    if (ok) ok = rename(tmp, rm.counts_path) == 0;
    if (!ok) complain(tmp);
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

/* wait for the parent's acknowledgement that this rank's part file exists,
 * 'A' and the event log's cap (0 without an answer: no log) */
static int64_t handshake(void) {
    char ack[1 + sizeof(int64_t)];
    size_t got = 0;
    int64_t cap = 0;
    if (rm.sock < 0) return 0;
    tell('S');
    while (got < sizeof ack) {
        struct pollfd p = {.fd = rm.sock, .events = POLLIN};
        int r = poll(&p, 1, 120000);
        if (r < 0 && errno == EINTR) continue;
        ssize_t k = r > 0 && (p.revents & POLLIN) ? recv(rm.sock, ack + got, sizeof ack - got, 0) : -1;
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            rm.sock = -1;
            return 0;
        }
        got += (size_t)k;
    }
    memcpy(&cap, ack + 1, sizeof cap);
    return ack[0] == 'A' && cap > 0 ? cap : 0;
}

/* the event log's records, all at once (pages are touched as it fills: in
 * huge pages where the kernel gives them, a page fault per 87381 records
 * rather than per 170), and the events file the snapshots append to */
static void log_begin(int64_t cap) {
    if (cap <= 0) return;
    size_t bytes = (size_t)cap <= SIZE_MAX / sizeof(rec_t) ? (size_t)cap * sizeof(rec_t) : 0;
    void *p = bytes ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (p != MAP_FAILED) {
        madvise(p, bytes, MADV_HUGEPAGE);   /* a hint: refused where huge pages are off */
        lg.rec = p;
    }
    if (!lg.rec) {
        fprintf(stderr, "rankmap.profile: rank %d: no memory for %lld events (--max-events): "
                "its event log stays empty\n", rm.rank, (long long)cap);
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s.events", rm.counts_path);
    lg.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (lg.fd < 0) complain(path);
    lg.cap = cap;
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
    rm.model = !text ? M_MPI : !strcmp(text, "none") ? M_NONE : !strcmp(text, "root") ? M_ROOT
             : !strcmp(text, "ring") ? M_RING : !strcmp(text, "tree") ? M_TREE : M_MPI;
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
    log_begin(handshake());
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
