/* stats.c - median, quantiles and the noise rule for timing samples
 * (kfuse bench / kfuse info). Quantiles interpolate linearly at position
 * p * (n - 1) of the sorted samples, so the median of an even count is the
 * mean of the two middle values. */
#include <math.h>
#include <stdlib.h>
#include "stats.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void kfs_sort(double *v, int n)
{
    if (n > 1)
        qsort(v, (size_t)n, sizeof(double), cmp_double);
}

double kfs_quantile_sorted(const double *sorted, int n, double p)
{
    double pos, frac;
    int lo;
    if (n <= 0)
        return 0.0;
    if (p <= 0.0)
        return sorted[0];
    if (p >= 1.0)
        return sorted[n - 1];
    pos = p * (double)(n - 1);
    lo = (int)floor(pos);
    frac = pos - (double)lo;
    if (lo + 1 >= n)
        return sorted[n - 1];
    return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

void kfs_summarize(double *samples, int n, kfs_summary *s)
{
    double sum = 0.0;
    int i;
    s->n = n;
    if (n <= 0) {
        s->median = s->p20 = s->p80 = s->min = s->max = s->mean = 0.0;
        return;
    }
    kfs_sort(samples, n);
    for (i = 0; i < n; i++)
        sum += samples[i];
    s->median = kfs_quantile_sorted(samples, n, 0.5);
    s->p20 = kfs_quantile_sorted(samples, n, 0.2);
    s->p80 = kfs_quantile_sorted(samples, n, 0.8);
    s->min = samples[0];
    s->max = samples[n - 1];
    s->mean = sum / (double)n;
}

int kfs_significant(const kfs_summary *a, const kfs_summary *b)
{
    double wa = a->p80 - a->p20, wb = b->p80 - b->p20;
    double spread = wa > wb ? wa : wb;
    return fabs(a->median - b->median) > spread;
}
