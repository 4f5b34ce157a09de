/* apps/kvnode/blast.c — `kvnode --role blast`: the raw loopback TCP
 * bandwidth of this machine, for the benchmark's baseline. One thread
 * writes --blast-mb MiB in 1 MiB send() calls into a connected loopback
 * socket, another reads it; prints bytes/s. No framing, no copies beyond
 * the kernel's: an upper bound for any protocol over the same sockets.
 * By default both sides use one 1 MiB buffer (cache-resident: the best
 * case); --blast-buf-mb N makes each side cycle through N MiB, so the
 * kernel copies from and to memory that is not in cache, as it does for
 * a block pool. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "apps/kvnode/kvnode.h"
#include "util/json.h"

#define CHUNK (1u << 20)

typedef struct blast { int fd; uint64_t bytes, buf_len; } blast;

static void *reader(void *arg) {
    blast *b = arg;
    uint8_t *buf = calloc(1, b->buf_len);
    uint64_t got = 0;
    while (buf && got < b->bytes) {
        uint64_t pos = got % b->buf_len;
        size_t want = b->buf_len - pos < CHUNK ? (size_t)(b->buf_len - pos) : CHUNK;
        ssize_t n = recv(b->fd, buf + pos, want, 0);
        if (n <= 0) break;
        got += (uint64_t)n;
    }
    free(buf);
    b->bytes = got;
    return NULL;
}

int kvn_run_blast(const kvn_opts *o) {
    uint64_t total = (uint64_t)(o->blast_mb ? o->blast_mb : 4096) << 20;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, o->host, &sa.sin_addr);
    socklen_t sl = sizeof sa;
    int lf = socket(AF_INET, SOCK_STREAM, 0);
    if (lf < 0 || bind(lf, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lf, 1) != 0 ||
        getsockname(lf, (struct sockaddr *)&sa, &sl) != 0) {
        perror("blast: listen");
        return EXIT_SIM;
    }
    int cf = socket(AF_INET, SOCK_STREAM, 0);
    if (cf < 0 || connect(cf, (struct sockaddr *)&sa, sizeof sa) != 0) {
        perror("blast: connect");
        return EXIT_SIM;
    }
    int af = accept(lf, NULL, NULL);
    uint64_t buf_len = (uint64_t)(o->blast_buf_mb > 1 ? o->blast_buf_mb : 1) << 20;
    blast b = {.fd = af, .bytes = total, .buf_len = buf_len};
    pthread_t th;
    uint8_t *buf = calloc(1, buf_len);
    if (af < 0 || !buf) return EXIT_SIM;
    for (uint64_t i = 0; i < buf_len; i += 4096) buf[i] = (uint8_t)i; /* fault it in before the clock starts */
    if (pthread_create(&th, NULL, reader, &b) != 0) return EXIT_SIM;
    uint64_t t0 = kvp_mono_ns(), sent = 0;
    while (sent < total) {
        uint64_t pos = sent % buf_len;
        size_t want = total - sent < CHUNK ? (size_t)(total - sent) : CHUNK;
        if (want > buf_len - pos) want = (size_t)(buf_len - pos);
        ssize_t n = send(cf, buf + pos, want, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += (uint64_t)n;
    }
    pthread_join(th, NULL);
    double s = (double)(kvp_mono_ns() - t0) / 1e9;
    printf("raw loopback TCP (%llu MiB buffers): %.3f GB in %.3f s = %.3f GB/s\n", (unsigned long long)(buf_len >> 20),
           (double)b.bytes / 1e9, s, (double)b.bytes / 1e9 / s);
    if (o->json) {
        FILE *f = kvn_json_open(o);
        if (f) {
            kv_json j;
            kv_json_init(&j, f);
            kv_json_obj(&j);
            kv_json_ku64(&j, "raw_bytes", b.bytes);
            kv_json_kf64(&j, "raw_s", s, 4);
            kv_json_kf64(&j, "raw_gbps", (double)b.bytes / 1e9 / s, 4);
            kv_json_end(&j);
            kv_json_nl(&j);
            fclose(f);
        }
    }
    free(buf);
    close(cf);
    close(af);
    close(lf);
    return b.bytes == total ? EXIT_CLEAN : EXIT_PEER_LOST; /* the connection broke */
}

/* ---- `kvnode --role kvt-blast`: the same transport path P2P uses ------------------ */
/* P's side: a sender actor submits 64-entry WRITE batches of one block per
 * entry (what the P2P sender submits; a block is --head-bytes x KV_HEADS,
 * kvnode's block) through the locked TCP kvt and its progress thread to
 * D's side (a second kvt with its own progress thread) over loopback,
 * keeping up to 8 batches in flight; each side's region holds 256 blocks
 * (at least 16 MiB). No fill, no verify: the transport's ceiling on this
 * machine. */
#include <stdatomic.h>

#include "transport/posix/net.h"
#include "transport/tcp/tcp.h"

#include "core/kv_data.h"

#define KB_ENTRIES 64u
#define KB_INFLIGHT 8u

typedef struct kb_side {
    kvp_net *net;
    kvt *t;
    kvt_ep ep;
    kvt_addr addr;
    uint32_t actor;
    uint8_t *mem;
    kvt_region region;
} kb_side;

typedef struct kb_run {
    kvp_rt *rt;
    kb_side p, d;
    kvt_peer peer;
    uint64_t batches_total, submitted, done, failed;
    uint64_t next_block;
    uint32_t block;        /* bytes per entry */
    uint64_t region_len;
    _Atomic uint64_t first_done_ns; /* the first batch's completion: connect, handshake, one batch */
    _Atomic bool finished;
} kb_run;

static void kb_submit_more(kb_run *r) {
    while (r->submitted < r->batches_total && r->submitted - r->done < KB_INFLIGHT) {
        kvt_write w[KB_ENTRIES];
        for (uint32_t i = 0; i < KB_ENTRIES; i++) {
            uint64_t b = r->next_block++ % (r->region_len / r->block);
            w[i] = (kvt_write){.local = r->p.region, .local_off = b * r->block, .remote = r->d.region,
                               .remote_off = b * r->block, .len = r->block};
        }
        if (kvt_submit(r->p.t, r->p.ep, r->peer, w, KB_ENTRIES, r->submitted, 0) != KV_OK) {
            r->failed++;
            atomic_store(&r->finished, true);
            return;
        }
        r->submitted++;
    }
}

static void kb_sender(void *self, const kv_msg *m) {
    kb_run *r = self;
    if (m->kind == KVT_MSG_EVENT) {
        const kvt_event *ev = m->payload;
        if (ev->kind != KVT_EV_DONE) return;
        if (r->done++ == 0) atomic_store(&r->first_done_ns, kvp_mono_ns());
        if (ev->done.status != KV_OK) r->failed++;
    }
    if (r->done == r->batches_total || r->failed) atomic_store(&r->finished, true);
    else kb_submit_more(r);
}

static void kb_sink(void *self, const kv_msg *m) {
    (void)self;
    (void)m;
}

static kv_status kb_side_new(kvp_env *pe, kb_run *r, kb_side *s, const kvn_opts *o, const char *name, kv_actor_fn fn) {
    kvt *inner;
    kv_status st = kvt_tcp_new(&pe->env, o->host, &inner);
    if (st != KV_OK) return st;
    if ((st = kvn_secure_kvt(o, inner)) != KV_OK) return st;
    kvp_net_cfg nc = {.inner = inner, .rt = r->rt, .event_data = kvt_tcp_event_data, .pollfds = kvt_tcp_pollfds};
    if ((st = kvp_net_new(&pe->env, &nc, &s->net)) != KV_OK) return st;
    s->t = kvp_net_kvt(s->net);
    s->mem = calloc(1, r->region_len);
    if (!s->mem) return KV_ENOMEM;
    for (uint64_t i = 0; i < r->region_len; i += 64) s->mem[i] = (uint8_t)i;
    st = kv_rt_spawn(kvp_rt_iface(r->rt), name, 0, fn, r, 1u << 18, &s->actor);
    if (st == KV_OK) st = kvt_ep_open(s->t, s->actor, &s->ep, &s->addr);
    if (st == KV_OK) st = kvt_reg(s->t, s->mem, r->region_len, KVT_MEM_HOST, &s->region);
    return st;
}

int kvn_run_kvt_blast(const kvn_opts *o) {
    static kvp_env pe;
    static kb_run r;
    kvp_env_cfg ec = {.seed = 1, .level = o->log_level, .tag = "kvt-blast"};
    kvp_env_init(&pe, &ec);
    kvp_rt_cfg rc = {.proc = 0, .abi = kvn_abi()};
    if (kvp_rt_new(&pe.env, &rc, &r.rt) != KV_OK) return EXIT_SIM;
    uint64_t total = (uint64_t)(o->blast_mb ? o->blast_mb : 4096) << 20;
    r.block = o->head_bytes * KV_HEADS;
    if (!r.block || r.block > KVT_TCP_ENTRY_MAX) {
        fprintf(stderr, "kvt-blast: a block (--head-bytes x %u) must be 1..%u bytes\n", KV_HEADS, KVT_TCP_ENTRY_MAX);
        return EXIT_USAGE;
    }
    r.region_len = (uint64_t)r.block * 256u < (16u << 20) ? (16u << 20) / r.block * r.block : (uint64_t)r.block * 256u;
    r.batches_total = total / ((uint64_t)KB_ENTRIES * r.block);
    if (!r.batches_total) r.batches_total = 1;
    atomic_init(&r.finished, false);
    atomic_init(&r.first_done_ns, 0);
    kv_status st = kb_side_new(&pe, &r, &r.p, o, "P.send", kb_sender);
    if (st == KV_OK) st = kb_side_new(&pe, &r, &r.d, o, "D.sink", kb_sink);
    if (st == KV_OK) st = kvt_connect(r.p.t, r.p.ep, &r.d.addr, &r.peer); /* dials at the first submit */
    if (st == KV_OK) st = kvp_rt_start(r.rt);
    if (st == KV_OK) st = kvp_net_start(r.p.net);
    if (st == KV_OK) st = kvp_net_start(r.d.net);
    if (st != KV_OK) {
        fprintf(stderr, "kvt-blast: set-up failed: %s\n", kv_status_str(st));
        return EXIT_SIM;
    }
    uint64_t t0 = kvp_mono_ns();
    kv_rt_post(kvp_rt_iface(r.rt), r.p.actor, 1, NULL, 0); /* kick the sender */
    while (!atomic_load(&r.finished)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    double s = (double)(kvp_mono_ns() - t0) / 1e9;
    kvp_net_stop(r.p.net);
    kvp_net_stop(r.d.net);
    kvp_rt_stop(r.rt);
    double bytes = (double)r.done * KB_ENTRIES * r.block;
    double first_ms = r.done ? (double)(atomic_load(&r.first_done_ns) - t0) / 1e6 : 0;
    printf("kvt (tcp + progress threads%s): %.3f GB in %.3f s = %.3f GB/s (%llu batches of %u x %u B, %llu failed); "
           "first batch done %.3f ms after the first submit (connect, HELLO%s, %u blocks)\n",
           o->key.set ? ", authenticated" : "", bytes / 1e9, s, bytes / 1e9 / s, (unsigned long long)r.done, KB_ENTRIES,
           r.block, (unsigned long long)r.failed, first_ms, o->key.set ? " and challenge-response" : "", KB_ENTRIES);
    if (o->json) {
        FILE *f = kvn_json_open(o);
        if (f) {
            kv_json j;
            kv_json_init(&j, f);
            kv_json_obj(&j);
            kv_json_kf64(&j, "kvt_bytes", bytes, 0);
            kv_json_kf64(&j, "kvt_s", s, 4);
            kv_json_kf64(&j, "kvt_gbps", bytes / 1e9 / s, 4);
            kv_json_ku64(&j, "block_bytes", r.block);
            kv_json_ku64(&j, "failed", r.failed);
            kv_json_kbool(&j, "authenticated", o->key.set);
            kv_json_kf64(&j, "first_batch_ms", first_ms, 3);
            kv_json_end(&j);
            kv_json_nl(&j);
            fclose(f);
        }
    }
    kvp_net_free(r.p.net);
    kvp_net_free(r.d.net);
    kvp_rt_free(r.rt);
    free(r.p.mem);
    free(r.d.mem);
    return r.failed ? EXIT_PEER_LOST : EXIT_CLEAN; /* batches whose transfer failed */
}
