/* sim/gen.h — random scenarios from a seed: topology (1-4 P, 1-4 D, TP 1/2/4,
 * 1-5 KV groups of every kind, small and large pools), a workload, and a
 * fault plan drawn under a swarm mask (each fault kind on or off for the
 * whole run, Groce et al.'s swarm testing). Pure function of the seed. */
#ifndef KVCONN_SIM_GEN_H
#define KVCONN_SIM_GEN_H

#include <stdint.h>

#include "sim/world.h"

/* Makes any scenario fit for automated search (sweeps, fuzzers), so that
 * every violation found is a finding rather than an artefact of the input:
 *  - D's receive timeout exceeds P's ready wait (vLLM: 540 s > 480 s); the
 *    reverse lets P's late WRITE land in blocks D already reused;
 *  - P's abort timeout is capped at 2 s virtual and the liveness bound grows
 *    with the workload (failed sends hold P's blocks until expiry, one after
 *    another on a small pool);
 *  - a "D is told a longer prompt" fault needs more blocks than P holds and
 *    no shared prefix: within P's last block, or shortened by a local hit
 *    on D, no connector can see the mismatch (only INV-DATA does). */
void sim_cfg_searchable(sim_world_cfg *cfg);

/* Fills cfg from seed; bugs is copied into cfg->bugs. Returns the swarm mask
 * (bit k: fault kind k enabled). */
uint32_t sim_gen(uint64_t seed, uint32_t bugs, sim_world_cfg *cfg);

/* Steady serving traffic from seed: 1-2 P and 1-2 D (TP 1 or 2), P2P, one
 * full group, 256 requests paced so each D batches tens at a time, no
 * faults. The workload of the lifecycle benchmark; returns 0. */
uint32_t sim_gen_steady(uint64_t seed, uint32_t bugs, sim_world_cfg *cfg);

/* Overload with faults from seed: the topologies, pools and connector
 * configurations of sim_gen, but 64-256 requests arriving 0-1.5 ms apart
 * (queues, batches of tens, preemption and pool pressure on the small
 * pools) and up to 32 faults under a swarm mask. Returns the swarm mask. */
uint32_t sim_gen_load(uint64_t seed, uint32_t bugs, sim_world_cfg *cfg);

/* A workload by name: "faults" (sim_gen, the default), "steady" or "load";
 * NULL for any other name. */
typedef uint32_t (*sim_gen_fn)(uint64_t seed, uint32_t bugs, sim_world_cfg *cfg);
sim_gen_fn sim_workload_gen(const char *name);

#endif
