/* heap.c — glibc malloc's settings, and huge pages for forked children
 * (see heap.h).
 *
 * A fresh build forks a child per action, and each child faults its
 * working memory in one 4 KiB page at a time: the model's tensors, which
 * protobuf-c copies out of the mapped file, the interpreter's buffers,
 * the pieces of the saved model. A first touch of a page cost 1.8 us of
 * kernel time here (still 1.45 us populated ahead with MAP_POPULATE or
 * MADV_POPULATE_WRITE), a 2 MiB transparent huge page 0.11 ms: 17 times
 * less a byte. Page faults were 44% of a fresh silero-vad build's kernel
 * time, and 55% of the faults were protobuf-c's copies.
 *
 * With THP in "madvise" mode (Debian's default) memory gets huge pages
 * only where madvise(MADV_HUGEPAGE) asked for them, and only in whole
 * aligned 2 MiB ranges of which no page is mapped yet. So blocks below
 * HEAP_MMAP_MAX come from the heap (malloc maps larger ones one by one,
 * never an aligned 2 MiB range), the heap grows HEAP_PAD at a time, and
 * right after each fork the child (heap_huge_top)
 *  - allocates, and never frees, a filler block from the start of the
 *    heap's free top to just below the next 2 MiB boundary, so that what
 *    it allocates next starts there;
 *  - drops the pages beyond that boundary that the parent had faulted in
 *    (free memory the parent once used: shared with the parent, each
 *    would be copied on its first write), and asks for huge pages there.
 * The filler costs address space only (the page of its header). The
 * parent keeps 4 KiB pages: its heap is small, and a child writing into
 * a huge page it shares with the parent copies it 4 KiB at a time.
 *
 * Growth of the heap past what was advised gets ordinary pages (brk makes
 * a new mapping, without the advice), and malloc_trim(0) gives the padded
 * top back. With defrag on "madvise" a huge-page fault may compact memory
 * when no free 2 MiB block is left (measured here: median 0.11 ms, once
 * in 300 4.3 ms, for 4 MiB): QUANTMAKE_HUGEPAGES=0 keeps 4 KiB pages.
 * Under AddressSanitizer, whose allocator is not glibc's, nothing here is
 * done. */
#include "heap.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)
/* the interpreter fixes the same two (HUGE_BLOCK in src/exec/interp.c) */
#define HEAP_MMAP_MAX (4 << 20)
#define HEAP_TRIM (8 << 20)
/* the heap's reserve: kept by ordinary trims (glibc trims down to the
 * pad), so a child finds this much free top for its huge pages */
#define HEAP_PAD (32 << 20)

#ifdef __SANITIZE_ADDRESS__
#define HEAP_GLIBC 0
#else
#define HEAP_GLIBC 1
#endif

static int huge_on;

void heap_huge_top(void)
{
	if (!HEAP_GLIBC || !huge_on)
		return;
	/* a heap there must be: before the first block, the top is no chunk */
	void *volatile first = malloc(1);
	free(first);
	/* The top chunk ends at the break (the main heap is contiguous;
	 * should it not be, the filler will not start where the top does,
	 * and nothing is changed). keepcost is the top chunk's size. */
	uintptr_t top = (uintptr_t)sbrk(0) - mallinfo2().keepcost;
	uintptr_t a = (top + 64 + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	/* a chunk [top, a - 16): malloc adds its 8-byte size field to the
	 * request and rounds to 16; the next chunk's header takes the 16
	 * bytes below a, so its memory starts at a */
	void *f = malloc(a - top - 24);
	if (!f)
		return;
	if ((uintptr_t)f != top + 16) {
		free(f); /* a free block served it: leave the heap as it is */
		return;
	}
	uintptr_t end = (a - 16 + mallinfo2().keepcost) & ~(HUGE_PAGE - 1);
	if (end > a) {
		/* all inside the free top chunk: nothing there is in use */
		(void)madvise((void *)a, end - a, MADV_DONTNEED);
		(void)madvise((void *)a, end - a, MADV_HUGEPAGE); /* a hint */
	}
}

void heap_init(void)
{
	if (!HEAP_GLIBC)
		return;
	(void)mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_MAX);
	(void)mallopt(M_TRIM_THRESHOLD, HEAP_TRIM);
	(void)mallopt(M_TOP_PAD, HEAP_PAD);
	const char *e = getenv("QUANTMAKE_HUGEPAGES");
	huge_on = !(e && !strcmp(e, "0"));
	if (!huge_on)
		return;
	(void)pthread_atfork(NULL, NULL, heap_huge_top);
	/* bind the handler's calls here, once: resolved lazily in each
	 * child, their symbol lookups faulted in 7 pages a child */
	(void)sbrk(0);
	(void)mallinfo2();
	(void)madvise(NULL, 0, MADV_NORMAL);
}
