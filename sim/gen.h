/* sim/gen.h — random scenarios from a seed: topology (1-4 P, 1-4 D, TP 1/2/4,
 * 1-5 KV groups of every kind, small and large pools), a workload, and a
 * fault plan drawn under a swarm mask (each fault kind on or off for the
 * whole run, Groce et al.'s swarm testing). Pure function of the seed. */
#ifndef KVCONN_SIM_GEN_H
#define KVCONN_SIM_GEN_H

#include <stdint.h>

#include "sim/world.h"

/* Fills cfg from seed; bugs is copied into cfg->bugs. Returns the swarm mask
 * (bit k: fault kind k enabled). */
uint32_t sim_gen(uint64_t seed, uint32_t bugs, sim_world_cfg *cfg);

#endif
