/* report.c - the outputs of `kfuse bench`: a table (default), CSV, JSON, and
 * an SVG plot written by hand (achieved GB/s against bytes moved on a log
 * axis, one marker series per op, the same-size copy drawn as a line). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"
#include "bench.h"

double kfb_gbs(int64_t bytes, double us)
{
    return us > 0.0 ? (double)bytes / (us * 1e-6) / 1e9 : 0.0;
}

/* the same-size copy's rate from the bytes it moves (2 x kfb_copy_half: up
 * to 8 KiB over the op's count) */
static double copy_gbs(const kfb_result *x)
{
    return kfb_gbs(2 * kfb_copy_half(x->bytes), x->copy.median);
}

static const char *status_name(kfb_status s)
{
    switch (s) {
    case KFB_TIMED: return "timed";
    case KFB_FAILED: return "failed";
    case KFB_SKIPPED: return "skipped";
    default: return "error";
    }
}

static void fmt_bytes(char *buf, size_t n, double b)
{
    if (b >= 1e9)
        snprintf(buf, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6)
        snprintf(buf, n, "%.1f MB", b / 1e6);
    else if (b >= 1e3)
        snprintf(buf, n, "%.1f KB", b / 1e3);
    else
        snprintf(buf, n, "%.0f B", b);
}

/* The notes column: batching, cache, launch floor, or why not timed. */
static void notes(const kfb_result *r, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
#define ADD(...)                                                            \
    do {                                                                    \
        int w_ = snprintf(buf + used, n - used, __VA_ARGS__);              \
        if (w_ > 0 && (size_t)w_ < n - used)                                \
            used += (size_t)w_;                                             \
    } while (0)
    if (r->status != KFB_TIMED) {
        ADD("%s", r->note[0] ? r->note : status_name(r->status));
        return;
    }
    if (r->batch > 1)
        ADD("batched x%d", r->batch);
    if (r->launch_bound)
        ADD("%slaunch-bound", used ? ", " : "");
    if (r->from_cache)
        ADD("%sfrom cache (rotation %.0f MB)", used ? ", " : "", r->rotation_bytes / 1e6);
    {
        /* a wide spread (other work on the machine, clocks moving) makes the
         * median and the ratio less than they look: say so */
        double op_spread = r->t.median > 0 ? (r->t.p80 - r->t.p20) / r->t.median : 0.0;
        double copy_spread = r->copy.median > 0 ? (r->copy.p80 - r->copy.p20) / r->copy.median
                                                : 0.0;
        double spread = op_spread > copy_spread ? op_spread : copy_spread;
        if (spread > KFR_NOISY_SPREAD)
            ADD("%snoisy (p20-p80 %.0f %% of the %s median)", used ? ", " : "", 100.0 * spread,
                op_spread >= copy_spread ? "op's" : "copy's");
    }
    if (r->note[0])
        ADD("%s%s", used ? ", " : "", r->note);
#undef ADD
}

void kfr_print_header(FILE *f, const kfb_run *run, const char *prefix)
{
    char l2[32], cold[32];
    fmt_bytes(l2, sizeof(l2), (double)run->l2_bytes);
    fmt_bytes(cold, sizeof(cold), (double)run->cold_target_bytes);
    fprintf(f, "%skfuse %s bench on %s\n", prefix, run->version, run->describe);
    fprintf(f, "%stiming: %s%s\n", prefix, run->timing_label, run->quick ? " (--quick)" : "");
    fprintf(f, "%swarm-up: %.0f ms global (copies), then per case max(2 calls, %.0f ms); "
               "calls < %.0f us are timed in batches per event pair\n",
            prefix, run->warmup_ms, run->case_warm_ms, run->batch_below_us);
    if (run->is_gpu)
        fprintf(f, "%scold caches: >= 2 input sets rotated, >= %s in total (2x L2 of %s)\n",
                prefix, cold, l2);
    else
        fprintf(f, "%scold caches: >= 2 input sets rotated, >= %s in total (on the CPU "
                   "256 MiB or 2x the last-level cache, read as %s)\n", prefix, cold, l2);
    if (!run->is_gpu && run->host_load >= 0.0)
        fprintf(f, "%shost load before the run: %.2f (1-minute average, %d CPUs)%s\n", prefix,
                run->host_load, run->host_cpus,
                run->host_load >= 0.5 ? ": other work shares the cores, and a thread that waits "
                "for a core stalls its whole parallel region; these times may be far off"
                : "");
    fprintf(f, "%sinputs: %s\n", prefix,
            run->distinct_inputs ? "every set its own random data"
                                 : "random data made once, copied into every set (--inputs replicated)");
    fprintf(f, "%sseed: %llu (--seed %llu replays the inputs and the verification data)\n",
            prefix, run->seed, run->seed);
    if (run->verify_rows > 0)
        fprintf(f, "%sverified first in the timed form against the float64 reference (rows "
                   "capped at %lld per case)%s; a failed case is not timed\n", prefix,
                run->verify_rows, run->is_gpu ? ", and the timed call on its own inputs "
                "against the CPU backend" : "");
    else
        fprintf(f, "%sverified first in the timed form against the float64 reference (all "
                   "rows)%s; a failed case is not timed\n", prefix, run->is_gpu ? ", and the "
                   "timed call on its own inputs against the CPU backend" : "");
    fprintf(f, "%sbytes: each input read once + each output written once (in-place: both); "
               "GB/s = bytes / median\n", prefix);
    fprintf(f, "%sratio = median / same-size device copy (bytes/2 read + bytes/2 written, "
               "bytes/2 rounded up to 4 KiB; same rotation, same timing)\n", prefix);
    fprintf(f, "%slaunch floor (empty kernel): %.3f us per event pair, %.3f us per launch "
               "in a batch; launch-bound = median < 2x floor\n",
            prefix, run->floor_single_us, run->floor_batched_us);
}

void kfr_print_table(FILE *f, const kfb_run *run, const kfb_result *r, int n)
{
    int i, timed = 0, failed = 0, skipped = 0;
    kfr_print_header(f, run, "");
    fprintf(f, "\n%-15s %-22s %-18s %-5s %10s %10s %-19s %8s %10s %6s  %s\n", "op", "variant",
            "shape", "dtype", "bytes", "median us", "p20-p80 us", "GB/s", "copy us", "ratio",
            "notes");
    for (i = 0; i < n; i++) {
        char b[32], spread[48], nt[256];
        fmt_bytes(b, sizeof(b), (double)r[i].bytes);
        notes(&r[i], nt, sizeof(nt));
        if (r[i].status == KFB_TIMED) {
            snprintf(spread, sizeof(spread), "%.2f-%.2f", r[i].t.p20, r[i].t.p80);
            double g = kfb_gbs(r[i].bytes, r[i].t.median);
            fprintf(f, "%-15s %-22s %-18s %-5s %10s %10.2f %-19s %8.*f %10.2f %6.2f  %s\n",
                    r[i].op, r[i].variant, r[i].shape, kf_dtype_name(r[i].c.dtype), b,
                    r[i].t.median, spread, g < 10.0 ? 2 : g < 100.0 ? 1 : 0, g,
                    r[i].copy.median, r[i].copy.median > 0 ? r[i].t.median / r[i].copy.median : 0.0,
                    nt);
            timed++;
        } else {
            fprintf(f, "%-15s %-22s %-18s %-5s %10s %10s %-19s %8s %10s %6s  %s\n", r[i].op,
                    r[i].variant, r[i].shape, kf_dtype_name(r[i].c.dtype), b, "-", "-", "-",
                    "-", "-", nt);
            if (r[i].status == KFB_SKIPPED)
                skipped++;
            else
                failed++;
        }
    }
    fprintf(f, "\n%d timed, %d failed, %d skipped\n", timed, failed, skipped);
}

void kfr_print_csv(FILE *f, const kfb_run *run, const kfb_result *r, int n)
{
    int i;
    kfr_print_header(f, run, "# ");
    fprintf(f, "op,variant,shape,dtype,bytes,status,rel_err,median_us,p20_us,p80_us,samples,"
               "batch,gbs,copy_us,copy_gbs,ratio,floor_us,launch_bound,n_sets,rotation_bytes,"
               "from_cache,note\n");
    for (i = 0; i < n; i++) {
        const kfb_result *x = &r[i];
        char nt[256];
        size_t k;
        notes(x, nt, sizeof(nt));
        for (k = 0; nt[k]; k++)            /* keep the field CSV-safe */
            if (nt[k] == ',' || nt[k] == '"' || nt[k] == '\n')
                nt[k] = ';';
        /* GB/s to 4 significant digits: a fixed decimal would print a slow case as 0.0 */
        fprintf(f, "%s,%s,%s,%s,%lld,%s,%.3g,%.3f,%.3f,%.3f,%d,%d,%.4g,%.3f,%.4g,%.4f,%.3f,%d,"
                   "%d,%lld,%d,%s\n",
                x->op, x->variant, x->shape, kf_dtype_name(x->c.dtype), (long long)x->bytes,
                status_name(x->status), x->rel_err, x->t.median, x->t.p20, x->t.p80, x->t.n,
                x->batch, kfb_gbs(x->bytes, x->t.median), x->copy.median,
                copy_gbs(x),
                x->copy.median > 0 ? x->t.median / x->copy.median : 0.0, x->floor_us,
                x->launch_bound, x->n_sets, (long long)x->rotation_bytes, x->from_cache, nt);
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* A number JSON accepts (no NaN / Inf). */
static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

void kfr_print_json(FILE *f, const kfb_run *run, const kfb_result *r, int n)
{
    int i;
    fputs("{\n  \"tool\": \"kfuse bench\",\n  \"version\": ", f);
    json_str(f, run->version);
    fputs(",\n  \"backend\": ", f);
    json_str(f, run->backend);
    fputs(",\n  \"device\": ", f);
    json_str(f, run->describe);
    fprintf(f, ",\n  \"seed\": %llu", run->seed);
    fputs(",\n  \"protocol\": {\"timing\": ", f);
    json_str(f, run->timing_label);
    fprintf(f, ", \"min_ms\": ");
    json_num(f, run->min_ms);
    fprintf(f, ", \"min_samples\": %d, \"global_warmup_ms\": ", run->min_samples);
    json_num(f, run->warmup_ms);
    fprintf(f, ", \"case_warmup_ms\": ");
    json_num(f, run->case_warm_ms);
    fprintf(f, ", \"batch_below_us\": ");
    json_num(f, run->batch_below_us);
    fprintf(f, ", \"cold_target_bytes\": %lld, \"l2_bytes\": %lld, \"verify_rows\": %lld, "
               "\"inputs\": \"%s\", \"quick\": %s, \"host_cpus\": %d, \"host_load\": ",
            (long long)run->cold_target_bytes, (long long)run->l2_bytes, run->verify_rows,
            run->distinct_inputs ? "distinct" : "replicated", run->quick ? "true" : "false",
            run->host_cpus);
    json_num(f, run->host_load >= 0.0 ? run->host_load : NAN);
    fputs("},\n", f);
    fputs("  \"launch_floor_us\": {\"per_event_pair\": ", f);
    json_num(f, run->floor_single_us);
    fputs(", \"per_launch_batched\": ", f);
    json_num(f, run->floor_batched_us);
    fputs("},\n  \"cases\": [\n", f);
    for (i = 0; i < n; i++) {
        const kfb_result *x = &r[i];
        char nt[256];
        notes(x, nt, sizeof(nt));
        fputs("    {\"op\": ", f);
        json_str(f, x->op);
        fputs(", \"variant\": ", f);
        json_str(f, x->variant);
        fputs(", \"shape\": ", f);
        json_str(f, x->shape);
        fputs(", \"dtype\": ", f);
        json_str(f, kf_dtype_name(x->c.dtype));
        fprintf(f, ", \"bytes\": %lld, \"status\": \"%s\", \"rel_err\": ", (long long)x->bytes,
                status_name(x->status));
        json_num(f, x->rel_err);
        if (x->status == KFB_TIMED) {
            fputs(", \"median_us\": ", f);
            json_num(f, x->t.median);
            fputs(", \"p20_us\": ", f);
            json_num(f, x->t.p20);
            fputs(", \"p80_us\": ", f);
            json_num(f, x->t.p80);
            fprintf(f, ", \"samples\": %d, \"batch\": %d, \"gbs\": ", x->t.n, x->batch);
            json_num(f, kfb_gbs(x->bytes, x->t.median));
            fputs(", \"copy_us\": ", f);
            json_num(f, x->copy.median);
            fprintf(f, ", \"copy_batch\": %d", x->copy_batch);
            fputs(", \"copy_gbs\": ", f);
            json_num(f, copy_gbs(x));
            fputs(", \"ratio\": ", f);
            json_num(f, x->copy.median > 0 ? x->t.median / x->copy.median : 0.0);
            fputs(", \"floor_us\": ", f);
            json_num(f, x->floor_us);
            fprintf(f, ", \"launch_bound\": %s, \"n_sets\": %d, \"rotation_bytes\": %lld, "
                       "\"from_cache\": %s",
                    x->launch_bound ? "true" : "false", x->n_sets,
                    (long long)x->rotation_bytes, x->from_cache ? "true" : "false");
        }
        fputs(", \"notes\": ", f);
        json_str(f, nt);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fputs("  ]\n}\n", f);
}

/* ---- SVG -------------------------------------------------------------------- */

static void xml_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

static int cmp_by_bytes(const void *a, const void *b)
{
    const kfb_result *x = *(const kfb_result *const *)a, *y = *(const kfb_result *const *)b;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* A "nice" axis maximum: 1, 2 or 5 times a power of ten, >= v. */
static double nice_ceil(double v)
{
    double p, m;
    if (v <= 0.0)
        return 1.0;
    p = pow(10.0, floor(log10(v)));
    m = v / p;
    return (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * p;
}

int kfr_write_svg(const char *path, const kfb_run *run, const kfb_result *r, int n)
{
    static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                   "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
                                   "#393b79", "#637939"};
    const int W = 960, H = 600, L = 80, R = 220, T = 50, B = 60;
    const int pw = W - L - R, ph = H - T - B;
    const kfb_result **sorted = NULL;
    double lx0 = 0, lx1 = 0, ymax = 0;
    int i, m = 0, op, series = 0, first;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    sorted = (const kfb_result **)calloc((size_t)(n > 0 ? n : 1), sizeof(*sorted));
    if (!sorted) {
        fclose(f);
        return -1;
    }
    for (i = 0; i < n; i++) {
        double g, c;
        if (r[i].status != KFB_TIMED || r[i].bytes <= 0)
            continue;
        sorted[m++] = &r[i];
        g = kfb_gbs(r[i].bytes, r[i].t.median);
        c = copy_gbs(&r[i]);
        if (g > ymax) ymax = g;
        if (c > ymax) ymax = c;
    }
    qsort(sorted, (size_t)m, sizeof(*sorted), cmp_by_bytes);
    if (m > 0) {
        lx0 = floor(log10((double)sorted[0]->bytes));
        lx1 = ceil(log10((double)sorted[m - 1]->bytes));
    }
    if (lx1 <= lx0)
        lx1 = lx0 + 1;
    ymax = nice_ceil(ymax * 1.05);

#define PX(bytes) (L + (log10((double)(bytes)) - lx0) / (lx1 - lx0) * pw)
#define PY(gbs) (T + ph - (gbs) / ymax * ph)
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\">kfuse bench: achieved GB/s vs "
               "bytes moved - ", L);
    xml_text(f, run->describe);
    fputs("</text>\n", f);
    /* grid and axes */
    for (i = 0; i <= 5; i++) {
        double v = ymax * i / 5.0;
        double y = PY(v);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y,
                L + pw, y);
        /* %g: a GB/s axis below 5 has ticks of fractions (0.4, 0.8, ...) */
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, y + 4,
                v);
    }
    for (i = (int)lx0; i <= (int)lx1; i++) {
        double x = L + (i - lx0) / (lx1 - lx0) * pw;
        static const char *units[] = {"B", "KB", "MB", "GB", "TB"};
        char lbl[32];
        int u = i / 3 < 0 ? 0 : i / 3 > 4 ? 4 : i / 3;
        snprintf(lbl, sizeof(lbl), "%g %s", pow(10.0, i - 3 * u), units[u]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, T,
                x, T + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, T + ph + 18,
                lbl);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#333\"/>\n", L, T, pw, ph);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">bytes moved per call (log "
               "scale)</text>\n", L + pw / 2, H - 18);
    fprintf(f, "<text x=\"18\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 18 %d)\">"
               "GB/s (bytes / median)</text>\n", T + ph / 2, T + ph / 2);

    /* the same-size copy: a line through the copy points, in bytes order */
    if (m > 0) {
        fputs("<polyline fill=\"none\" stroke=\"#444\" stroke-width=\"1.5\" "
              "stroke-dasharray=\"6 3\" points=\"", f);
        for (i = 0; i < m; i++)
            fprintf(f, "%.1f,%.1f ", PX(sorted[i]->bytes),
                    PY(copy_gbs(sorted[i])));
        fputs("\"/>\n", f);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\" stroke-width=\"1.5\" "
               "stroke-dasharray=\"6 3\"/>\n<text x=\"%d\" y=\"%d\">same-size copy</text>\n",
            L + pw + 16, T + 10, L + pw + 40, T + 10, L + pw + 46, T + 14);

    /* one marker series per op */
    for (op = 0; op < KF_OP_COUNT; op++) {
        const char *color = colors[series % 12];
        first = 1;
        for (i = 0; i < m; i++) {
            const kfb_result *x = sorted[i];
            if ((int)x->c.op != op)
                continue;
            if (first) {
                fprintf(f, "<g fill=\"%s\">\n", color);
                first = 0;
            }
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"><title>", PX(x->bytes),
                    PY(kfb_gbs(x->bytes, x->t.median)));
            xml_text(f, x->op);
            fputc(' ', f);
            xml_text(f, x->variant);
            fputc(' ', f);
            xml_text(f, x->shape);
            fprintf(f, ": %.4g us, %.4g GB/s</title></circle>\n", x->t.median,
                    kfb_gbs(x->bytes, x->t.median));
        }
        if (!first) {
            int ly = T + 32 + series * 20;
            fputs("</g>\n", f);
            fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"4\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">",
                    L + pw + 28, ly, color, L + pw + 46, ly + 4);
            xml_text(f, kf_op_name((kf_op)op));
            fputs("</text>\n", f);
            series++;
        }
    }
    if (m == 0)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no timed case</text>\n",
                L + pw / 2, T + ph / 2);
#undef PX
#undef PY
    fputs("</svg>\n", f);
    free(sorted);
    return fclose(f) == 0 ? 0 : -1;
}
