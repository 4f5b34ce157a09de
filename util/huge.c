/* util/huge.c — see huge.h. */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS, madvise(MADV_HUGEPAGE) */
#include "util/huge.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_ALIGN ((size_t)2u << 20)

void *kv_huge_map(size_t n, size_t *len_out) {
    size_t len = (n + HUGE_ALIGN - 1u) & ~(HUGE_ALIGN - 1u);
    if (!len || len < n) return NULL;
    uint8_t *raw = mmap(NULL, len + HUGE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    /* Over-mapped by one alignment unit, then trimmed to the aligned part. */
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_ALIGN - 1u) & ~(uintptr_t)(HUGE_ALIGN - 1u));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    if (raw + HUGE_ALIGN > p) munmap(p + len, (size_t)(raw + HUGE_ALIGN - p));
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE); /* advice only: with THP off the pages stay 4 KiB */
#endif
    *len_out = len;
    return p;
}

void kv_huge_unmap(void *p, size_t len) {
    if (p) munmap(p, len);
}
