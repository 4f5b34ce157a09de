/* sim/scenario.h — a scenario: one complete simulator input (a
 * sim_world_cfg plus the choice bytes it borrows) in two encodings.
 *
 *   binary  for fuzzers: a total decoder, any byte string (the empty one
 *           too) decodes to a valid, clamped scenario, deterministically;
 *   text    (.kvs) for humans and regression tests: one directive per line,
 *           strict, every malformed input gives an error naming file, line
 *           and column (never a crash, never a silent clamp).
 * binary -> text -> binary is a fixed point, and so is text -> text.
 *
 * A sim_scenario owns its choice bytes: cfg.choice points at choice[]. A
 * plain struct copy keeps pointing at the source's array; use
 * sim_scenario_copy (or sim_scenario_clamp, which rewires it).
 *
 * Valid ranges (sim_scenario_clamp forces them; the text parser rejects
 * anything outside them):
 *   n_p, n_d 1..4          tp_p, tp_d in {1,2,4}     block_size in {4,8,16,32}
 *   n_groups 1..5          group[0] FULL; others FULL, SLIDING or MAMBA
 *   sliding window 1..1024 (window is 0 for FULL and MAMBA)
 *   pool_blocks_p/d 8..1024  policy fail|recompute   prefix_caching 0/1
 *   conn_p, conn_d 1..4 (kv_conn_kind)   store_capacity 16..4096 keys
 *   head_bytes a power of two 8..sim_head_bytes_max(cfg) (<= 4096)
 *   abort/recv timeout 1 ms..600 s   live_bound 1 s..1,000,000 s
 *   bugs: subset of the five kv_bug bits (mask 0x1f)
 *   n_reqs 0..SIM_REQS_MAX, each request:
 *     at_ns <= 60 s, p_engine < n_p, d_engine < n_d, prompt_len 1..512,
 *     max_tokens 1..64, prompt_len + max_tokens <= 64 * block_size,
 *     prefix_group 0..7, prefix_len <= prompt_len, sequential 0/1,
 *     d_extra_tokens 0..128
 *   n_faults 0..SIM_FAULTS_MAX, each fault:
 *     at_ns <= 60 s, kind 1..SIM_F_KIND_COUNT-1 (v2: ..12, v3: ..13, v4: ..14, v5: ..15, v6: ..16), target,
 *     arg < 2^16
 *   seed any; choice_len 0..SIM_CHOICE_MAX
 * Entries past n_groups / n_reqs / n_faults and choice bytes past
 * choice_len are zero in a clamped scenario. Requests and faults keep their
 * given order.
 *
 * Binary layout (all integers little-endian):
 *   [magic]  4 bytes "KVS" 0x07 (SIM_SCENARIO_VERSION). Optional: an input
 *            that starts with exactly these 4 bytes has its fields from
 *            offset 4; any other input has its fields from offset 0. An
 *            input starting "KVS" 0x01 is a version 1 scenario (fields from
 *            offset 4, the fixed part without the version 2 fields: every
 *            engine p2p, the default store), so old artifacts still decode.
 *            "KVS" 0x02 is version 2: fields from offset 4, as version 4
 *            except that fault kinds map into version 2's 1..12; "KVS"
 *            0x03 (version 3) maps them into 1..13; "KVS" 0x04 (version
 *            4) maps them into 1..14 and has no head_bytes (8); "KVS" 0x05
 *            (version 5) maps them into 1..15; "KVS" 0x06 (version 6) into
 *            1..16 and has no lookup switch (on); "KVS" 0x07 (version 7)
 *            has no draft count (0). A magic-less input decodes
 *            as version 2 too; only inputs of a version reach the kinds and
 *            fields added in it (3: peer_crash, 4: peer_hang, 5: head_bytes
 *            and abort_on_kv, 6: store_crash, 7: store_lookup_off and
 *            store_exists_fail, 8: num_spec).
 *   fixed part (68 bytes from version 8; 67 in version 7; 66 in versions 5
 *   and 6; 64 before):
 *     u64 seed
 *     u8 n_p, u8 n_d, u8 tp_p, u8 tp_d, u8 block_size
 *     u16 pool_blocks_p, u16 pool_blocks_d
 *     u8 policy, u8 prefix_caching, u8 n_groups
 *     5 x { u8 kind, u16 window }           (all KV_GROUPS_MAX entries)
 *     u64 abort_timeout_ns, u64 recv_timeout_ns, u64 live_bound_ns
 *     u8 bugs
 *     (version 2) u8 conn_p, u8 conn_d, u16 store_capacity
 *     (version 5) u16 head_bytes
 *     (version 7) u8 store_lookup_off (bit 0; the rest ignored)
 *     (version 8) u8 num_spec (draft tokens per decode step, mod 5; 0 with
 *                 a recurrent group)
 *   u16 n_reqs, then n_reqs x 18 bytes:
 *     u64 at_ns, u8 p_engine, u8 d_engine, u16 prompt_len, u8 max_tokens,
 *     u8 prefix_group, u16 prefix_len, u8 sequential, u8 d_extra_tokens
 *   u8 n_faults, then n_faults x 13 bytes:
 *     u64 at_ns, u8 kind, u16 target, u16 arg
 *   every remaining byte: the choice stream (the first SIM_CHOICE_MAX kept).
 * Decoding rules: a field whose bytes are not all present takes its default
 * (sim_world_cfg_default; a request defaults to prompt 16, max 4, the rest
 * 0; a fault to kind abort, the rest 0) and ends the input. A count is
 * clamped first (n_reqs mod 257, n_faults mod 65), then cut to the entries
 * whose first byte is present. Every value is then clamped: a value inside
 * its range is kept, one outside maps by modulo into it (lo + v % (hi-lo+1);
 * sets like {1,2,4} by index v % 3; bugs by mask). sim_scenario_to_bytes
 * writes the canonical form (with magic), so from_bytes(to_bytes(s)) == s
 * for every clamped s. n_reqs is a u16 (not u8) because SIM_REQS_MAX is 256.
 *
 * Text format (.kvs): see sim_scenario_parse below. */
#ifndef KVCONN_SIM_SCENARIO_H
#define KVCONN_SIM_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvconn/status.h"
#include "sim/world.h"

#define SIM_SCENARIO_VERSION 8u
/* The largest live_bound_ns a scenario holds: above the longest bound
 * sim_cfg_searchable derives, (600 s + 600 s + 1 s) x (256 + 4) requests. */
#define SIM_LIVE_BOUND_MAX_S 1000000 /* a plain literal: messages print it (SIM_STR) */
#define SIM_LIVE_BOUND_MAX_NS (SIM_LIVE_BOUND_MAX_S * 1000000000ull)
/* The smallest live_bound_ns a scenario holds (1 s). */
#define SIM_LIVE_BOUND_MIN_NS 1000000000ull
/* The largest head_bytes a topology holds (a power of two 8..4096): one
 * rank's block within KV_BLOCK_BYTES_MAX, or KV_STORE_SNAP_BYTES with a store
 * connector, and every engine's KV within 96 MiB of the world's arena. */
uint32_t sim_head_bytes_max(const sim_world_cfg *c);
#define SIM_STR_(x) #x
#define SIM_STR(x) SIM_STR_(x)
#define SIM_CHOICE_MAX 4096u
/* Largest file sim_scenario_load reads. */
#define SIM_SCENARIO_FILE_MAX (1u << 20)
/* Enough for to_text / to_bytes of any clamped scenario. */
#define SIM_SCENARIO_TEXT_MAX 65536u
#define SIM_SCENARIO_FIXED_BYTES 68u    /* version 8 */
#define SIM_SCENARIO_FIXED_BYTES_V7 67u /* version 7 */
#define SIM_SCENARIO_FIXED_BYTES_V5 66u /* versions 5 and 6 */
#define SIM_SCENARIO_FIXED_BYTES_V2 64u /* versions 2-4 (and magic-less inputs) */
#define SIM_SCENARIO_REQ_BYTES 18u
#define SIM_SCENARIO_FAULT_BYTES 13u
#define SIM_SCENARIO_BYTES_MAX                                                                  \
    (4u + SIM_SCENARIO_FIXED_BYTES + 2u + SIM_REQS_MAX * SIM_SCENARIO_REQ_BYTES + 1u +         \
     SIM_FAULTS_MAX * SIM_SCENARIO_FAULT_BYTES + SIM_CHOICE_MAX)

typedef struct sim_scenario {
    sim_world_cfg cfg;              /* cfg.choice == choice, cfg.choice_len <= SIM_CHOICE_MAX */
    uint8_t choice[SIM_CHOICE_MAX];
} sim_scenario;

/* Defaults: sim_world_cfg_default, no choice bytes, cfg.choice wired. */
void sim_scenario_init(sim_scenario *s);
/* Forces every field into its valid range (see above); idempotent; keeps a
 * valid scenario unchanged. Rewires cfg.choice. */
void sim_scenario_clamp(sim_scenario *s);
/* dst := src with dst->cfg.choice pointing at dst->choice. */
void sim_scenario_copy(sim_scenario *dst, const sim_scenario *src);
/* True when every field in use is in range (clamp would change nothing
 * that sim_scenario_equal looks at). */
bool sim_scenario_valid(const sim_scenario *s);

/* ---- binary ------------------------------------------------------------------ */

/* Total decoder: any bytes (buf may be NULL when len is 0). */
void sim_scenario_from_bytes(const uint8_t *buf, size_t len, sim_scenario *out);
/* Canonical encoding. KV_EINVAL: s not valid; KV_EFULL: cap too small
 * (SIM_SCENARIO_BYTES_MAX always suffices). */
kv_status sim_scenario_to_bytes(const sim_scenario *s, uint8_t *buf, size_t cap, size_t *out_len);

/* ---- text -------------------------------------------------------------------- */

typedef struct sim_parse_error {
    char file[128];
    uint32_t line, col; /* 1-based; 0 for errors about the whole file */
    char msg[160];
} sim_parse_error;

/* Parses a .kvs text:
 *
 *   kvs 1                                   # must be the first directive
 *   seed 42
 *   topology p=1 d=2 tp_p=2 tp_d=1 block=16 pool_p=96 pool_d=96 policy=fail prefix_cache=1
 *            conn_p=multi(p2p,store) conn_d=multi(p2p,store) store=1024   (same line)
 *   group full                              # the first group line replaces
 *   group sliding window=64                 # the default single full group
 *   group mamba
 *   timeouts abort_ns=2000000000 recv_ns=2500000000 live_ns=20000000000
 *   bugs none                               # or: bugs err_early_return,recv_map_race
 *   req at=1000000 p=0 d=1 prompt=100 max=4 prefix_group=0 prefix_len=64 seq=1 d_extra=0
 *   fault at=1500000 kind=abort target=1 arg=0
 *   choice 0a1bff                           # hex; may repeat, concatenated
 *
 * '#' starts a comment; blank lines are fine; tokens are separated by
 * spaces or tabs (a trailing '\r' is ignored). key=value pairs come in any
 * order; a missing key takes its default (sim_world_cfg_default; request:
 * at=0 p=0 d=0 prompt=16 max=4 prefix_group=0 prefix_len=0 seq=0 d_extra=0;
 * fault: at=0 kind=abort target=0 arg=0; sliding window=64). seed,
 * topology, timeouts and bugs appear at most once; topology must precede
 * the first req (request checks use its n_p, n_d and block). Numbers are
 * plain unsigned decimal. Values out of range are errors, never clamped.
 * Fault kinds are sim_fault_name's names, bugs kv_bug_name's.
 *
 * Version 1 files (no conn_p/conn_d/store keys) are read as they were
 * meant: every engine p2p. The writer always writes SIM_SCENARIO_VERSION.
 *
 * Errors: KV_EVERSION for a version other than 1..SIM_SCENARIO_VERSION,
 * KV_EINVAL for anything else; *err names file_name (or "<input>"), the
 * line and the column of the offending token (of the offending bug name or
 * hex digit inside a token), and what was wrong. On error *out holds the
 * defaults. err may be NULL. */
kv_status sim_scenario_parse(const char *text, size_t len, const char *file_name, sim_scenario *out,
                             sim_parse_error *err);
/* Reads and parses a file of at most SIM_SCENARIO_FILE_MAX bytes (into a
 * thread-local scratch buffer). KV_ENOENT: cannot open; KV_EIO: read
 * error; KV_EFULL: too large; else as sim_scenario_parse. */
kv_status sim_scenario_load(const char *path, sim_scenario *out, sim_parse_error *err);
/* Canonical text, every field explicit, NUL-terminated (*out_len excludes
 * the NUL). KV_EINVAL: s not valid; KV_EFULL: cap too small
 * (SIM_SCENARIO_TEXT_MAX always suffices). */
kv_status sim_scenario_to_text(const sim_scenario *s, char *buf, size_t cap, size_t *out_len);

/* Directive count for shrink reports: 1 (topology) + n_groups + n_reqs +
 * n_faults. */
uint32_t sim_scenario_directives(const sim_scenario *s);
/* Field-wise equality of the fields in use (groups < n_groups, requests <
 * n_reqs, faults < n_faults, choice bytes < choice_len); ignores the
 * cfg.choice pointer. */
bool sim_scenario_equal(const sim_scenario *a, const sim_scenario *b);

#endif
