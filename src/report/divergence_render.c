/* divergence_render.c - token-level divergence reports (divergence.h), pure
 * functions of a drift_tokdiv_report:
 *   text      runs: one row per workload and overall (positions pooled),
 *             then the prompts with the highest mean KL and where their
 *             top-1 tokens first part; text mode: the blocks
 *             llama-perplexity --kl-divergence prints (mean KLD with its
 *             uncertainty, KLD percentiles, delta-p percentiles, RMS delta-p,
 *             same top p), so the two outputs read side by side;
 *   markdown  the workload table and the top prompts;
 *   json      every figure, every prompt (probabilities and shares as
 *             fractions, KL in nats; non-finite numbers as null).
 * Labels, stack specs, prompt ids, tokens and error messages come from
 * outside: sanitised in text and markdown, repaired in JSON
 * (report_safe.c); text and markdown end with report_text_finish. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/divergence.h"
#include "driftbench/report.h"
#include "report/report_internal.h"
#include "util/sanitize.h"
#include "util/util.h"

static const char *wl_name(drift_workload w) {
    return w == DRIFT_WL_UNKNOWN ? "text" : drift_workload_name(w);
}

/* A KL figure in 10 columns: fixed with 6 decimals, or 3 significant
 * digits in scientific notation below 1e-3 (stacks that differ only in
 * rounding), so a small value never prints as 0.000000. */
static const char *kl_str(double v, char *buf, size_t cap) {
    if (v != 0 && fabs(v) < 1e-3) snprintf(buf, cap, "%10.3e", v);
    else snprintf(buf, cap, "%10.6f", v);
    return buf;
}

/* Prompts with figures, highest mean KL first (ties: prompt order). */
static int cmp_kl_desc(const void *a, const void *b) {
    const drift_tokdiv_prompt *p = *(const drift_tokdiv_prompt *const *)a, *q = *(const drift_tokdiv_prompt *const *)b;
    double x = p->s.kl_mean, y = q->s.kl_mean;
    if (x > y) return -1;
    if (x < y) return 1;
    return p < q ? -1 : p > q;
}

static const drift_tokdiv_prompt **ranked(const drift_tokdiv_report *r, size_t *n) {
    const drift_tokdiv_prompt **v = malloc((r->n_prompts ? r->n_prompts : 1) * sizeof *v);
    *n = 0;
    if (!v) return NULL;
    for (size_t i = 0; i < r->n_prompts; i++)
        if (!r->prompts[i].error && r->prompts[i].s.n > 0) v[(*n)++] = &r->prompts[i];
    qsort(v, *n, sizeof *v, cmp_kl_desc);
    return v;
}

/* A token's text for one line: quotes, with \n, \t, \\ and " escaped,
 * then the sanitiser (other controls, bidi, invalid UTF-8). */
static void put_token(util_buf *b, const char *s) {
    util_buf t = {0};
    buf_puts(&t, "\"");
    for (; s && *s && t.len < REPORT_NAME_MAX_BYTES; s++) {
        if (*s == '\n') buf_puts(&t, "\\n");
        else if (*s == '\t') buf_puts(&t, "\\t");
        else if (*s == '\r') buf_puts(&t, "\\r");
        else if (*s == '"' || *s == '\\') buf_printf(&t, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) buf_printf(&t, "\\x%02x", (unsigned char)*s);
        else buf_append(&t, s, 1);
    }
    buf_puts(&t, "\"");
    if (t.data) util_sanitize_append(b, t.data, t.len, UTIL_SAN_LINE);
    buf_free(&t);
}

/* s in a Markdown code span of a table cell: sanitised, '|' and '`' as '?'. */
static void md_code(util_buf *b, const char *s) {
    size_t at = b->len;
    report_put_name(b, s);
    for (size_t k = at; k < b->len; k++)
        if (b->data[k] == '|' || b->data[k] == '`') b->data[k] = '?';
}

static size_t count_diverged(const drift_tokdiv_report *r, size_t *scored) {
    size_t k = 0;
    *scored = 0;
    for (size_t i = 0; i < r->n_prompts; i++) {
        if (r->prompts[i].error) continue;
        (*scored)++;
        if (r->prompts[i].first_diff >= 0) k++;
    }
    return k;
}

static void text_header(util_buf *b, const drift_tokdiv_report *r) {
    buf_puts(b, "token divergence, teacher-forced: baseline '");
    report_put_name(b, r->baseline);
    buf_puts(b, "' vs target '");
    report_put_name(b, r->target);
    buf_puts(b, "'\n");
    if (r->text_mode) {
        buf_printf(b, "text: %zu tokens, %d chunks of %d, scored: second half of each chunk (%d positions per chunk)\n",
                   r->n_text_tokens, r->n_chunks, r->ctx, r->ctx - 1 - r->ctx / 2);
    } else {
        buf_puts(b, "stacks: ");
        report_put_name(b, r->baseline_spec);
        buf_puts(b, "\n    vs  ");
        report_put_name(b, r->target_spec);
        buf_puts(b, "\napi ");
        report_put_name(b, r->api ? r->api : "?");
        buf_printf(b, "; %zu prompts", r->n_prompts);
        if (r->limit) buf_printf(b, " (a sample of at most %zu per workload, seed %llu)", r->limit, (unsigned long long)r->seed);
        buf_printf(b, ", %zu skipped; positions = the baseline's answer tokens\n", r->n_skipped);
        if (r->method && strcmp(r->method, "logits")) {
            buf_puts(b, "method ");
            report_put_name(b, r->method);
            buf_printf(b, ", K = %d: an HTTP server's top-K prompt logprobs; KL over the tokens both lists give plus "
                          "the rest of the mass (a lower bound of the full KL)\n", r->top_k);
        }
    }
    buf_printf(b, "%zu positions scored", r->overall.n);
    if (r->overall.n_nonfinite) buf_printf(b, ", %zu left out (non-finite logits)", r->overall.n_nonfinite);
    buf_printf(b, "; %.1f s\n\n", r->elapsed_ms / 1000.0);
}

static void text_row(util_buf *b, const char *name, size_t n_prompts, const drift_tokdiv_summary *s) {
    char k[6][32];
    buf_printf(b, "%-13s %7zu %9zu  %s ± %-10s %s %s %s %s  %7.3f%%  %+7.3f%% %+7.3f%% %+7.3f%%\n", name, n_prompts,
               s->n, kl_str(s->kl_mean, k[0], 32), kl_str(s->kl_se, k[1], 32), kl_str(s->kl_p50, k[2], 32),
               kl_str(s->kl_p90, k[3], 32), kl_str(s->kl_p99, k[4], 32), kl_str(s->kl_max, k[5], 32),
               100 * s->same_top, 100 * s->dp_p01, 100 * s->dp_p50, 100 * s->dp_p99);
}

static void render_runs_text(util_buf *b, const drift_tokdiv_report *r, size_t max_prompts) {
    buf_printf(b, "%-13s %7s %9s  %-23s %10s %10s %10s %10s  %8s  %8s %8s %8s\n", "workload", "prompts", "positions",
               "mean KL ± se (nats)", "KL p50", "p90", "p99", "max", "same top", "dp p01", "p50", "p99");
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        if (!r->present[w]) continue;
        size_t k = 0;
        for (size_t i = 0; i < r->n_prompts; i++)
            if (!r->prompts[i].error && r->prompts[i].workload == (drift_workload)w) k++;
        text_row(b, drift_workload_name((drift_workload)w), k, &r->wl[w]);
    }
    size_t scored = 0, diverged = count_diverged(r, &scored);
    text_row(b, "overall", scored, &r->overall);
    buf_printf(b, "(dp = p_target - p_baseline of the baseline's token; same top = positions whose top-1 tokens agree)\n");
    buf_printf(b, "\ntop-1 tokens part somewhere in %zu of %zu prompts\n", diverged, scored);
    size_t n = 0;
    const drift_tokdiv_prompt **v = max_prompts ? ranked(r, &n) : NULL;
    if (v && n) {
        size_t show = n < max_prompts ? n : max_prompts;
        buf_printf(b, "\nprompts with the highest mean KL (%zu of %zu):\n", show, n);
        buf_printf(b, "  %-24s %-12s %6s %10s %9s  %s\n", "prompt", "workload", "tokens", "mean KL", "same top",
                   "first top-1 disagreement (answer token index: baseline vs target)");
        for (size_t i = 0; i < show; i++) {
            const drift_tokdiv_prompt *p = v[i];
            char k[32];
            buf_puts(b, "  ");
            report_put_name_pad(b, p->prompt_id, 24);
            buf_printf(b, " %-12s %6d %s %8.2f%%  ", wl_name(p->workload), p->n_answer_tokens,
                       kl_str(p->s.kl_mean, k, sizeof k), 100 * p->s.same_top);
            if (p->first_diff < 0) buf_puts(b, "none");
            else {
                buf_printf(b, "%d: ", p->first_diff);
                put_token(b, p->first_base_text);
                buf_puts(b, " vs ");
                put_token(b, p->first_target_text);
            }
            buf_puts(b, "\n");
        }
    }
    free(v);
    if (r->n_skipped) {
        buf_printf(b, "\nskipped (%zu):\n", r->n_skipped);
        size_t shown = 0;
        for (size_t i = 0; i < r->n_prompts && shown < 10; i++)
            if (r->prompts[i].error) {
                buf_puts(b, "  ");
                report_put_name(b, r->prompts[i].prompt_id);
                buf_printf(b, " (%s): ", wl_name(r->prompts[i].workload));
                report_put_text(b, r->prompts[i].error, REPORT_NOTE_MAX_BYTES);
                buf_puts(b, "\n");
                shown++;
            }
        if (r->n_skipped > shown) buf_printf(b, "  ... and %zu more\n", r->n_skipped - shown);
    }
}

static void render_text_mode(util_buf *b, const drift_tokdiv_report *r) {
    const drift_tokdiv_summary *s = &r->overall;
    char k1[32], k2[32];
    buf_puts(b, "====== Perplexity statistics ======\n");
    buf_printf(b, "Mean PPL(Q)                   : %10.6f\n", s->ppl_target);
    buf_printf(b, "Mean PPL(base)                : %10.6f\n", s->ppl_base);
    buf_puts(b, "\n====== KL divergence statistics ======\n");
    buf_printf(b, "Mean    KLD: %s ± %s\n", kl_str(s->kl_mean, k1, sizeof k1), kl_str(s->kl_se, k2, sizeof k2));
    buf_printf(b, "Maximum KLD: %s\n", kl_str(s->kl_max, k1, sizeof k1));
    buf_printf(b, "99.0%%   KLD: %s\n", kl_str(s->kl_p99, k1, sizeof k1));
    buf_printf(b, "90.0%%   KLD: %s\n", kl_str(s->kl_p90, k1, sizeof k1));
    buf_printf(b, "Median  KLD: %s\n", kl_str(s->kl_p50, k1, sizeof k1));
    buf_puts(b, "\n====== Token probability statistics ======\n");
    buf_printf(b, "Mean    Δp: %6.3f ± %5.3f %%\n", 100 * s->dp_mean, 100 * s->dp_se);
    buf_printf(b, "Maximum Δp: %6.3f%%\n", 100 * s->dp_max);
    buf_printf(b, "99.0%%   Δp: %6.3f%%\n", 100 * s->dp_p99);
    buf_printf(b, "95.0%%   Δp: %6.3f%%\n", 100 * s->dp_p95);
    buf_printf(b, "90.0%%   Δp: %6.3f%%\n", 100 * s->dp_p90);
    buf_printf(b, "75.0%%   Δp: %6.3f%%\n", 100 * s->dp_p75);
    buf_printf(b, "Median  Δp: %6.3f%%\n", 100 * s->dp_p50);
    buf_printf(b, "25.0%%   Δp: %6.3f%%\n", 100 * s->dp_p25);
    buf_printf(b, "10.0%%   Δp: %6.3f%%\n", 100 * s->dp_p10);
    buf_printf(b, " 5.0%%   Δp: %6.3f%%\n", 100 * s->dp_p05);
    buf_printf(b, " 1.0%%   Δp: %6.3f%%\n", 100 * s->dp_p01);
    buf_printf(b, "Minimum Δp: %6.3f%%\n", 100 * s->dp_min);
    buf_printf(b, "RMS Δp    : %6.3f %%\n", 100 * s->dp_rms);
    buf_printf(b, "Same top p: %6.3f ± %5.3f %%\n", 100 * s->same_top, 100 * s->same_top_se);
}

static void render_markdown(util_buf *b, const drift_tokdiv_report *r, size_t max_prompts) {
    buf_puts(b, "### Token divergence (teacher-forced): `");
    md_code(b, r->baseline);
    buf_puts(b, "` vs `");
    md_code(b, r->target);
    buf_puts(b, "`\n\n");
    if (r->text_mode) {
        buf_printf(b, "Text of %zu tokens, %d chunks of %d; the second half of each chunk scored.\n\n", r->n_text_tokens,
                   r->n_chunks, r->ctx);
    } else {
        buf_printf(b, "%zu prompts (%zu skipped), api ", r->n_prompts, r->n_skipped);
        report_put_name(b, r->api ? r->api : "?");
        buf_puts(b, "; positions = the baseline's answer tokens.\n\n");
    }
    buf_puts(b, "| workload | positions | mean KL (nats) | ± se | KL p50 | KL p90 | KL p99 | KL max | same top-1 | Δp p01 | Δp p50 | Δp p99 |\n");
    buf_puts(b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int w = -1; w < DRIFT_WL_COUNT; w++) {
        const drift_tokdiv_summary *s = w < 0 ? &r->overall : &r->wl[w];
        if (w >= 0 && (!r->present[w] || r->text_mode)) continue;
        buf_printf(b, "| %s | %zu | %.4g | %.2g | %.4g | %.4g | %.4g | %.4g | %.3f%% | %+.3f%% | %+.3f%% | %+.3f%% |\n",
                   w < 0 ? "**overall**" : drift_workload_name((drift_workload)w), s->n, s->kl_mean, s->kl_se,
                   s->kl_p50, s->kl_p90, s->kl_p99, s->kl_max, 100 * s->same_top, 100 * s->dp_p01, 100 * s->dp_p50,
                   100 * s->dp_p99);
    }
    size_t n = 0;
    const drift_tokdiv_prompt **v = max_prompts && !r->text_mode ? ranked(r, &n) : NULL;
    if (v && n) {
        size_t show = n < max_prompts ? n : max_prompts;
        buf_printf(b, "\nHighest mean KL (%zu of %zu prompts):\n\n", show, n);
        buf_puts(b, "| prompt | workload | tokens | mean KL | same top-1 | first top-1 disagreement |\n");
        buf_puts(b, "|---|---|---:|---:|---:|---|\n");
        for (size_t i = 0; i < show; i++) {
            const drift_tokdiv_prompt *p = v[i];
            buf_puts(b, "| `");
            md_code(b, p->prompt_id);
            buf_printf(b, "` | %s | %d | %.4g | %.2f%% | ", wl_name(p->workload), p->n_answer_tokens, p->s.kl_mean,
                       100 * p->s.same_top);
            if (p->first_diff < 0) buf_puts(b, "none |\n");
            else {
                buf_printf(b, "%d: `", p->first_diff);
                util_buf t = {0};
                put_token(&t, p->first_base_text);
                buf_puts(&t, " vs ");
                put_token(&t, p->first_target_text);
                for (size_t k = 0; t.data && k < t.len; k++) /* keep the table cell whole */
                    if (t.data[k] == '|' || t.data[k] == '`') t.data[k] = '?';
                buf_puts(b, t.data ? t.data : "");
                buf_free(&t);
                buf_puts(b, "` |\n");
            }
        }
    }
    free(v);
}

static json_t *summary_json(const drift_tokdiv_summary *s) {
    json_t *o = json_object();
    json_object_set_new(o, "positions", json_integer((json_int_t)s->n));
    json_object_set_new(o, "nonfinite", json_integer((json_int_t)s->n_nonfinite));
    struct {
        const char *k;
        double v;
    } f[] = {{"kl_mean", s->kl_mean}, {"kl_se", s->kl_se},     {"kl_p50", s->kl_p50},   {"kl_p90", s->kl_p90},
             {"kl_p99", s->kl_p99},   {"kl_max", s->kl_max},   {"same_top", s->same_top}, {"same_top_se", s->same_top_se},
             {"dp_mean", s->dp_mean}, {"dp_se", s->dp_se},     {"dp_rms", s->dp_rms},   {"dp_min", s->dp_min},
             {"dp_p01", s->dp_p01},   {"dp_p05", s->dp_p05},   {"dp_p10", s->dp_p10},   {"dp_p25", s->dp_p25},
             {"dp_p50", s->dp_p50},   {"dp_p75", s->dp_p75},   {"dp_p90", s->dp_p90},   {"dp_p95", s->dp_p95},
             {"dp_p99", s->dp_p99},   {"dp_max", s->dp_max},   {"ppl_base", s->ppl_base}, {"ppl_target", s->ppl_target}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) json_object_set_new(o, f[i].k, report_json_num(f[i].v));
    return o;
}

static char *render_json(const drift_tokdiv_report *r) {
    json_t *o = json_object();
    json_object_set_new(o, "mode", json_string(r->text_mode ? "text" : "runs"));
    json_object_set_new(o, "baseline", report_json_str(r->baseline));
    json_object_set_new(o, "target", report_json_str(r->target));
    json_object_set_new(o, "baseline_spec", r->baseline_spec ? report_json_str(r->baseline_spec) : json_null());
    json_object_set_new(o, "target_spec", r->target_spec ? report_json_str(r->target_spec) : json_null());
    if (r->text_mode) {
        json_object_set_new(o, "ctx", json_integer(r->ctx));
        json_object_set_new(o, "text_tokens", json_integer((json_int_t)r->n_text_tokens));
        json_object_set_new(o, "chunks", json_integer(r->n_chunks));
    } else {
        json_object_set_new(o, "api", r->api ? report_json_str(r->api) : json_null());
        json_object_set_new(o, "method", r->method ? report_json_str(r->method) : json_null());
        json_object_set_new(o, "top_k", json_integer(r->top_k));
        json_object_set_new(o, "limit_per_workload", json_integer((json_int_t)r->limit));
        json_object_set_new(o, "seed", json_integer((json_int_t)r->seed));
    }
    json_object_set_new(o, "prompts_total", json_integer((json_int_t)r->n_prompts));
    json_object_set_new(o, "skipped", json_integer((json_int_t)r->n_skipped));
    json_object_set_new(o, "elapsed_ms", report_json_num(r->elapsed_ms));
    json_object_set_new(o, "overall", summary_json(&r->overall));
    json_t *wl = json_object();
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (r->present[w]) json_object_set_new(wl, drift_workload_name((drift_workload)w), summary_json(&r->wl[w]));
    json_object_set_new(o, "workloads", wl);
    json_t *arr = json_array();
    for (size_t i = 0; i < r->n_prompts; i++) {
        const drift_tokdiv_prompt *p = &r->prompts[i];
        json_t *j = json_object();
        json_object_set_new(j, "id", report_json_str(p->prompt_id));
        json_object_set_new(j, "workload", json_string(wl_name(p->workload)));
        json_object_set_new(j, "prompt_tokens", json_integer(p->n_prompt_tokens));
        json_object_set_new(j, "answer_tokens", json_integer(p->n_answer_tokens));
        if (p->error) {
            json_object_set_new(j, "error", report_json_str(p->error));
        } else {
            if (!r->text_mode) json_object_set_new(j, "tokens_from", json_string(p->tokens_from_logprobs ? "logprobs" : "text"));
            if (!r->text_mode) json_object_set_new(j, "unaligned", json_integer(p->n_unaligned));
            json_object_set_new(j, "summary", summary_json(&p->s));
            if (p->first_diff >= 0) {
                json_object_set_new(
                    j, "first_diff",
                    json_pack("{s:i, s:I, s:o?, s:I, s:o?}", "index", p->first_diff, "baseline_id",
                              (json_int_t)p->first_base_id, "baseline_token",
                              p->first_base_text ? report_json_str(p->first_base_text) : NULL, "target_id",
                              (json_int_t)p->first_target_id, "target_token",
                              p->first_target_text ? report_json_str(p->first_target_text) : NULL));
            } else {
                json_object_set_new(j, "first_diff", json_null());
            }
        }
        json_array_append_new(arr, j);
    }
    json_object_set_new(o, r->text_mode ? "chunks_detail" : "prompts", arr);
    char *t = report_json_dump(o, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(o);
    return t;
}

drift_status drift_tokdiv_render(const drift_tokdiv_report *r, int fmt, size_t max_prompts, char **out,
                                 drift_error *err) {
    *out = NULL;
    if (fmt == DRIFT_FORMAT_JSON) {
        *out = render_json(r);
        return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    util_buf b = {0};
    if (fmt == DRIFT_FORMAT_TEXT) {
        text_header(&b, r);
        if (r->text_mode) render_text_mode(&b, r);
        else render_runs_text(&b, r, max_prompts);
    } else if (fmt == DRIFT_FORMAT_MARKDOWN) {
        render_markdown(&b, r, max_prompts);
    } else {
        return drift_error_set(err, DRIFT_ERR_INVALID, "divergence reports are text, json or markdown");
    }
    return report_text_finish(&b, out, err);
}
