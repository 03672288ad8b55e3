/* heap.h — glibc malloc's settings for quantmake, and transparent huge
 * pages for the memory a forked child allocates (see heap.c). */
#ifndef QM_HEAP_H
#define QM_HEAP_H

/* Set malloc's thresholds and make every process forked from now on
 * (the build's stage children) take fresh heap memory in 2 MiB pages.
 * Call first thing in main(), before any thread starts.
 * QUANTMAKE_HUGEPAGES=0 in the environment keeps 4 KiB pages. */
void heap_init(void);

/* In this process, from now on, what the heap has not handed out yet in
 * 2 MiB pages (what each forked child does; for a subcommand that does
 * its work in the main process). Only a hint: changes nothing but speed. */
void heap_huge_top(void);

#endif
