/* What one locked instruction costs on this machine, next to the plain store it replaces: the
 * numbers docs/performance.md quotes for a mutex's lock and unlock (a compare-exchange and an
 * exchange, each a locked instruction on x86-64) on the hot paths.
 *
 *     cc -O2 benchmarks/locked_instruction.c -o /tmp/locked_instruction && /tmp/locked_instruction
 *
 * Each row: the best of 5 runs of 20,000,000 iterations, ns per iteration. */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static _Atomic long word;

static double seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

#define ITERATIONS 20000000
#define ROW(name, body)                                                          \
    do {                                                                         \
        double best = 1e9;                                                       \
        for (int run = 0; run < 5; run++) {                                      \
            double start = seconds();                                            \
            for (int i = 0; i < ITERATIONS; i++) {                               \
                body;                                                            \
                __asm__ volatile("" ::: "memory");                               \
            }                                                                    \
            double ns = (seconds() - start) / ITERATIONS * 1e9;                  \
            best = ns < best ? ns : best;                                        \
        }                                                                        \
        printf("%-52s %6.2f ns\n", name, best);                                  \
    } while (0)

int main(void) {
    ROW("empty loop", (void)0);
    ROW("release store (a plain mov)", atomic_store_explicit(&word, 0, memory_order_release));
    ROW("exchange (xchg: one locked instruction)", atomic_exchange(&word, 0));
    ROW("fetch-add (lock xadd)", atomic_fetch_add(&word, 1));
    ROW("uncontended lock + unlock (lock cmpxchg, then xchg)", {
        long expected = 0;
        atomic_compare_exchange_strong(&word, &expected, 1);
        atomic_exchange(&word, 0);
    });
    return 0;
}
