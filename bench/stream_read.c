// A plain STREAM-style read, independent of qmpi's code: the external yardstick for
// `qmpi bench`'s bandwidth probe and for decode's bytes/s. Sums an array of doubles far larger
// than the last-level cache with an OpenMP reduction, written the obvious way and left to the
// compiler (-O3 -march=native -ffast-math -fopenmp vectorizes and unrolls the sum); no software
// prefetch, no intrinsics. Like STREAM, the array is first touched by the threads that read it.
// Usage: stream_read [MiB (2048)] [repetitions (10)]; prints best and median GB/s (1e9 B/s).
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 2048;
  const int reps = argc > 2 ? atoi(argv[2]) : 10;
  const size_t n = mib * 1024 * 1024 / sizeof(double);
  double* a = aligned_alloc(64, n * sizeof(double));
  if (!a || reps < 1) return 1;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) a[i] = 1.0;
  double* gbs = malloc(sizeof(double) * (size_t)reps);
  double total = 0;
  for (int r = 0; r < reps; ++r) {
    double s = 0;
    const double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (size_t i = 0; i < n; ++i) s += a[i];
    const double t = omp_get_wtime() - t0;
    total += s;
    gbs[r] = (double)(n * sizeof(double)) / t / 1e9;
  }
  qsort(gbs, (size_t)reps, sizeof(double), cmp);
  printf(
      "{\"stream_read_mib\": %zu, \"threads\": %d, \"best_gb_s\": %.2f, \"median_gb_s\": %.2f, "
      "\"check\": %.0f}\n",
      mib, omp_get_max_threads(), gbs[reps - 1], gbs[reps / 2], total / reps);
  free(gbs);
  free(a);
  return 0;
}
