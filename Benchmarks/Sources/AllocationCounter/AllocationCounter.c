// Interposes the C allocator's entry points to count allocations. Linked into the benchmark
// executable, these definitions take precedence over glibc's for the whole process (the Swift
// runtime's swift_slowAlloc included) and forward to glibc's own implementations.
#include "AllocationCounter.h"

#include <errno.h>
#include <stddef.h>

// `__GLIBC__` comes from the C library's headers (errno.h), so it is tested after including one.
#if defined(__GLIBC__)
#include <malloc.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static unsigned long allocationCount = 0;

static inline void count_allocation(void) {
    __atomic_fetch_add(&allocationCount, 1, __ATOMIC_RELAXED);
}

unsigned long benchmark_allocation_count(void) {
    return __atomic_load_n(&allocationCount, __ATOMIC_RELAXED);
}

unsigned long benchmark_allocated_bytes(void) {
    return (unsigned long)mallinfo2().uordblks;
}

void *malloc(size_t size) {
    count_allocation();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_allocation();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    count_allocation();
    return __libc_realloc(pointer, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count_allocation();
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0) {
        return EINVAL;
    }
    count_allocation();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) {
        return ENOMEM;
    }
    *result = pointer;
    return 0;
}
#else
// Elsewhere allocations are not counted.
unsigned long benchmark_allocation_count(void) { return 0; }
unsigned long benchmark_allocated_bytes(void) { return 0; }
#endif
