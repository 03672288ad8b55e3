/* heap.h — glibc malloc's settings for quantmake (see heap.c). */
#ifndef QM_HEAP_H
#define QM_HEAP_H

/* Set malloc's thresholds. Call first thing in main(), before any thread
 * starts. */
void heap_init(void);

#endif
