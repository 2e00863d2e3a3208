#ifndef ALLOCATION_COUNTER_H
#define ALLOCATION_COUNTER_H

/// The number of allocations made through malloc, calloc, realloc, posix_memalign and
/// aligned_alloc since the process started, in every thread.
///
/// The benchmark executable defines those functions itself, counting each call and forwarding it
/// to glibc's allocator, so allocations made by the Swift runtime are counted too.
unsigned long benchmark_allocation_count(void);

/// Bytes handed out by malloc and not freed yet, chunk headers included
/// (`mallinfo2().uordblks`); 0 where glibc is not used.
unsigned long benchmark_allocated_bytes(void);

#endif
