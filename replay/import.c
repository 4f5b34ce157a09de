/* replay/import.c — see import.h. */
#include "replay/import.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/fuzz_common.h"
#include "replay/finding.h"
#include "replay/input.h"

/* Largest input read: the decoder keeps the first SIM_CHOICE_MAX choice
 * bytes, so anything past a full scenario is ignored by the fuzzer too. */
#define INPUT_MAX SIM_SCENARIO_FILE_MAX

/* One replay_import call's state; every pointer borrowed from the caller. */
typedef struct importer {
    replay_db *db;
    int64_t run;
    sim_world *w;
    uint32_t bugs;           /* the fuzzer's KVCONN_BUG */
    replay_import_note note; /* may be NULL */
    void *ctx;               /* for note */
    replay_import_stats *st;
    replay_err *err;
} importer;

static kv_status import_file(importer *im, const char *path) {
    static uint8_t buf[INPUT_MAX];
    static sim_scenario sc;
    sim_result r;
    size_t len = 0;
    kv_status s = replay_read_file(path, buf, sizeof buf, &len, im->err);
    if (s != KV_OK)
        return s;
    sim_scenario_from_bytes(buf, len, &sc);
    fuzz_prepare(&sc.cfg, im->bugs);
    im->st->inputs++;
    replay_import_what what;
    int64_t id = 0;
    if (sim_world_run(im->w, &sc.cfg, NULL, &r) != KV_OK || r.sim_error != KV_OK) {
        what = REPLAY_IMPORT_SIM_ERROR;
    } else if (!r.violated) {
        what = REPLAY_IMPORT_CLEAN;
    } else {
        replay_source src = {.origin = REPLAY_ORIGIN_IMPORT,
                             .input = buf,
                             .input_len = len,
                             .source = path,
                             .skip_seen_input = true};
        replay_recorded rec;
        replay_fit_how how;
        s = replay_record_run(im->db, im->run, im->w, &sc.cfg, &r, &src, &rec, &how, im->err);
        if (s != KV_OK)
            return s;
        id = rec.case_id;
        what = how == REPLAY_FIT_LOST ? REPLAY_IMPORT_LOST
               : rec.seen_input       ? REPLAY_IMPORT_DUPLICATE
               : rec.is_new           ? REPLAY_IMPORT_NEW
                                      : REPLAY_IMPORT_SEEN;
    }
    im->st->by_what[what]++;
    if (im->note)
        im->note(im->ctx, path, what, id, &r);
    return KV_OK;
}

static bool is_input(const char *name, bool in_crashes) {
    if (name[0] == '.')
        return false;
    if (!strncmp(name, "crash-", 6))
        return true;
    return in_crashes && strcmp(name, "README.txt");
}

static kv_status walk(importer *im, const char *dir, bool in_crashes, int depth) {
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, NULL, alphasort);
    if (n < 0)
        return replay_fail(im->err, REPLAY_E_NOT_FOUND, "%s: cannot read the directory (%s)", dir,
                           strerror(errno));
    kv_status s = KV_OK;
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        char path[4096];
        struct stat sb;
        if (s != KV_OK || !strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (lstat(path, &sb) != 0)
            continue;
        if (S_ISDIR(sb.st_mode) && depth < REPLAY_IMPORT_DEPTH)
            s = walk(im, path, !strcmp(name, "crashes"), depth + 1);
        else if (S_ISREG(sb.st_mode) && is_input(name, in_crashes))
            s = import_file(im, path);
    }
    for (int i = 0; i < n; i++)
        free(ents[i]);
    free(ents);
    return s;
}

kv_status replay_import(replay_db *db, int64_t run, sim_world *w, const char *path, uint32_t bugs,
                        replay_import_note note, void *ctx, replay_import_stats *st,
                        replay_err *err) {
    importer im = {
        .db = db, .run = run, .w = w, .bugs = bugs, .note = note, .ctx = ctx, .st = st, .err = err};
    struct stat sb;
    if (stat(path, &sb) != 0)
        return replay_fail(err, REPLAY_E_NOT_FOUND, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        const char *base = strrchr(path, '/');
        base = base && base[1] ? base + 1 : path;
        return walk(&im, path, !strcmp(base, "crashes"), 0);
    }
    return import_file(&im, path);
}
