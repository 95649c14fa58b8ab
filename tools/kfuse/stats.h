/* stats.h - statistics of timing samples for kfuse bench / info: median,
 * percentiles (linear interpolation between closest ranks, as numpy's
 * default), and the noise rule of docs/bench.md. */
#ifndef KFC_STATS_H
#define KFC_STATS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kfs_summary {
    int n;
    double median;
    double p20;
    double p80;
    double min;
    double max;
    double mean;
} kfs_summary;

/* Sort v[0..n) ascending in place. */
void kfs_sort(double *v, int n);
/* The p-quantile (0 <= p <= 1) of ascending sorted[0..n): the value at
 * position p * (n - 1), interpolated linearly between its two neighbours.
 * p = 0.5 gives the median (the mean of the two middle values for even n).
 * Returns 0 for n <= 0. */
double kfs_quantile_sorted(const double *sorted, int n, double p);
/* Summary of samples[0..n); sorts samples in place. */
void kfs_summarize(double *samples, int n, kfs_summary *s);
/* The noise rule: a difference between two results smaller than their
 * spread (the larger p20-p80 width of the two) is noise. Returns 1 when the
 * medians of a and b differ by more than that, else 0. */
int kfs_significant(const kfs_summary *a, const kfs_summary *b);

#ifdef __cplusplus
}
#endif

#endif /* KFC_STATS_H */
