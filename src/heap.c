/* heap.c — glibc malloc's settings (see heap.h).
 *
 * Blocks below HEAP_MMAP_MAX come from the heap rather than a mapping of
 * their own (a mapping per tensor cost a system call and a fresh page
 * fault per page each time a batch reused its buffers), and the heap is
 * trimmed only past HEAP_TRIM. Under AddressSanitizer, whose allocator is
 * not glibc's, nothing is set.
 *
 * (Huge pages for forked children were here; they relied on glibc's chunk
 * layout to save 1-10 ms on builds of tiny models, and are gone.) */
#include "heap.h"

#include <malloc.h>

/* the interpreter fixes the same one (HUGE_BLOCK in src/exec/interp.c) */
#define HEAP_MMAP_MAX (4 << 20)
#define HEAP_TRIM (8 << 20)

void heap_init(void)
{
#ifndef __SANITIZE_ADDRESS__
	(void)mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_MAX);
	(void)mallopt(M_TRIM_THRESHOLD, HEAP_TRIM);
#endif
}
