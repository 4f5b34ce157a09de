/* replay/fuzz_hook.h — the fuzz targets' door into the findings database:
 * with KVCONN_DB=FILE in the environment, a violation found by a fuzz
 * target is recorded (origin "fuzz", the input bytes kept) before the
 * target aborts. Without KVCONN_DB it does nothing.
 *
 * The first finding of a process opens FILE, adds a runs row (tool: the
 * target's name; config: KVCONN_BUG) and keeps both for the process's
 * life; its ended_at is set with each finding, since the target aborts
 * right after. An input already recorded (an artifact re-run) adds
 * nothing. A database error is printed and the finding still aborts
 * as usual (the crash artifact is never lost). */
#ifndef KVCONN_REPLAY_FUZZ_HOOK_H
#define KVCONN_REPLAY_FUZZ_HOOK_H

#include <stddef.h>
#include <stdint.h>

#include "sim/world.h"

/* cfg: the prepared config that ran (fuzz_prepare applied); r: its result. */
void replay_fuzz_record(const char *target, const uint8_t *data, size_t size,
                        const sim_world_cfg *cfg, const sim_result *r);

#endif
