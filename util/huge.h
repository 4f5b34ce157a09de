/* util/huge.h — big zeroed memory as transparent huge pages.
 *
 * kv_huge_map(n) maps at least n bytes (rounded up to 2 MiB, what *len
 * receives), 2 MiB-aligned, private and anonymous, so the kernel hands
 * them out zeroed, and advises them as transparent huge pages. On a kernel
 * whose THP mode is "madvise" (Debian's default) that turns the first touch
 * of 192 MiB from about fifty thousand page faults into about a hundred;
 * with THP off the advice is ignored and the pages are 4 KiB. NULL when the
 * mapping fails. kv_huge_unmap(p, len) takes back what kv_huge_map gave,
 * with the *len it reported.
 *
 * Users: the production env's block pools and slabs (transport/posix) and
 * the simulator's per-world arena (sim/world.c). Not used by core/. */
#ifndef KVCONN_UTIL_HUGE_H
#define KVCONN_UTIL_HUGE_H

#include <stddef.h>

void *kv_huge_map(size_t n, size_t *len);
void kv_huge_unmap(void *p, size_t len);

#endif
