/* bench.h: the subcommands of sluice-bench and the statistics they share. */
#ifndef BENCH_H
#define BENCH_H

#include <stddef.h>

int bench_formats_main(int argc, char **argv);
int bench_feed_main(int argc, char **argv);

/* Median of n values (sorts v in place). */
double bench_median(double *v, size_t n);

#endif
