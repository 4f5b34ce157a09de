/* replay/input.c — see input.h. */
#include "replay/input.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_common.h"

bool replay_parse_db_spec(const char *spec, char *path, size_t cap, int64_t *id, bool *ok) {
    *ok = false;
    if (strncmp(spec, "db:", 3))
        return false;
    const char *rest = spec + 3, *colon = strrchr(rest, ':');
    if (!colon || colon == rest || (size_t)(colon - rest) >= cap)
        return true;
    char *end;
    errno = 0;
    long long v = strtoll(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || v <= 0)
        return true;
    memcpy(path, rest, (size_t)(colon - rest));
    path[colon - rest] = 0;
    *id = (int64_t)v;
    *ok = true;
    return true;
}

kv_status replay_read_file(const char *path, uint8_t *buf, size_t cap, size_t *out_len,
                           replay_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return replay_fail(err, REPLAY_E_NOT_FOUND, "%s: cannot open (%s)", path, strerror(errno));
    size_t got = fread(buf, 1, cap, f);
    int bad = ferror(f);
    int more = !bad && fgetc(f) != EOF;
    fclose(f);
    if (bad)
        return replay_fail(err, REPLAY_E_IO, "%s: read error", path);
    if (more)
        return replay_fail(err, REPLAY_E_BAD_INPUT, "%s: larger than %zu bytes", path, cap);
    *out_len = got;
    return KV_OK;
}

/* "# signature TEXT" and "# trace-hash HEX" lines of a .kvs text. */
static void read_expectations(const char *text, replay_input *out) {
    for (const char *line = text; line && *line;
         line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        const char *eol = strchr(line, '\n');
        size_t n = eol ? (size_t)(eol - line) : strlen(line);
        if (n && line[n - 1] == '\r')
            n--;
        if (n > 12 && !strncmp(line, "# signature ", 12) && n - 12 < sizeof out->signature) {
            memcpy(out->signature, line + 12, n - 12);
            out->signature[n - 12] = 0;
            out->have_sig = true;
        } else if (n > 13 && !strncmp(line, "# trace-hash ", 13)) {
            char *end;
            uint64_t h = strtoull(line + 13, &end, 16);
            if (end != line + 13) {
                out->trace_hash = h;
                out->have_hash = true;
            }
        }
    }
}

static kv_status load_text(const char *path, const uint8_t *buf, size_t len, replay_input *out,
                           replay_err *err) {
    sim_parse_error pe;
    kv_status st = sim_scenario_parse((const char *)buf, len, path, &out->sc, &pe);
    if (st != KV_OK) {
        replay_err_kind k = st == KV_EVERSION ? REPLAY_E_FORMAT : REPLAY_E_BAD_INPUT;
        if (pe.line)
            return replay_fail(err, k, "%s:%u:%u: %s", pe.file, pe.line, pe.col, pe.msg);
        return replay_fail(err, k, "%s: %s", path, pe.msg);
    }
    read_expectations((const char *)buf, out);
    return KV_OK;
}

static kv_status load_binary(const char *path, const uint8_t *buf, size_t len,
                             const replay_load_opts *o, replay_input *out, replay_err *err) {
    if (o->fuzz) {
        sim_scenario_from_bytes(buf, len, &out->sc);
        fuzz_prepare(&out->sc.cfg, o->bugs);
        return KV_OK;
    }
    if (len >= 4 && !memcmp(buf, "KVS", 3) && (buf[3] < 1 || buf[3] > SIM_SCENARIO_VERSION))
        return replay_fail(err, REPLAY_E_FORMAT,
                           "%s: binary scenario in format version %u; this kvsim decodes versions "
                           "1..%u (with --fuzz "
                           "the file is decoded as raw fuzz_scenario input instead)",
                           path, buf[3], SIM_SCENARIO_VERSION);
    if (len > SIM_SCENARIO_BYTES_MAX)
        return replay_fail(err, REPLAY_E_BAD_INPUT,
                           "%s: larger than a binary scenario can be (%u bytes); a text scenario "
                           "needs the .kvs extension",
                           path, (unsigned)SIM_SCENARIO_BYTES_MAX);
    sim_scenario_from_bytes(buf, len, &out->sc);
    return KV_OK;
}

static kv_status load_db(const char *path, int64_t id, const replay_load_opts *o, replay_input *out,
                         replay_err *err) {
    static replay_case c;
    replay_db *db;
    kv_status st = replay_db_open(path, REPLAY_DB_READ, &db, err);
    if (st != KV_OK)
        return st;
    st = replay_db_case_get(db, id, &c, err);
    replay_db_close(db);
    if (st != KV_OK)
        return st;
    if (o->minimized && !c.info.have_min)
        return replay_fail(err, REPLAY_E_NOT_FOUND,
                           "%s: case %" PRId64
                           " has no minimized scenario (kvsim shrink db:%s:%" PRId64 ")",
                           path, id, path, id);
    sim_scenario_copy(&out->sc, o->minimized ? &c.min : &c.sc);
    out->from_db = true;
    snprintf(out->db_path, sizeof out->db_path, "%s", path);
    out->info = c.info;
    out->have_sig = true;
    snprintf(out->signature, sizeof out->signature, "%s", c.info.signature);
    out->have_hash = true;
    out->trace_hash = o->minimized ? c.info.min_trace_hash : c.info.trace_hash;
    return KV_OK;
}

kv_status replay_input_load(const char *spec, const replay_load_opts *o, replay_input *out,
                            replay_err *err) {
    static uint8_t buf[SIM_SCENARIO_FILE_MAX];
    memset(out, 0, sizeof *out);
    sim_scenario_init(&out->sc);
    char path[1024];
    int64_t id = 0;
    bool ok;
    kv_status st;
    if (replay_parse_db_spec(spec, path, sizeof path, &id, &ok)) {
        if (!ok)
            return replay_fail(err, REPLAY_E_BAD_INPUT,
                               "'%s': want db:FILE:ID with ID a case number", spec);
        st = load_db(path, id, o, out, err);
    } else {
        size_t len = 0, n = strlen(spec);
        st = replay_read_file(spec, buf, sizeof buf, &len, err);
        if (st != KV_OK)
            return st;
        if (n >= 4 && !strcmp(spec + n - 4, ".kvs"))
            st = load_text(spec, buf, len, out, err);
        else
            st = load_binary(spec, buf, len, o, out, err);
    }
    if (st != KV_OK)
        return st;
    if (!o->fuzz)
        out->sc.cfg.bugs |= o->bugs;
    out->sc.cfg.choice = out->sc.choice;
    return KV_OK;
}
