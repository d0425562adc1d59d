/* store.c - SQLite store (skeleton; being implemented). */
#include "driftbench/store.h"

#include <stdlib.h>

#define NI(err) drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "store not implemented yet")

drift_status drift_store_open(const char *path, drift_store **out, drift_error *err) { (void)path; *out = NULL; return NI(err); }
void drift_store_close(drift_store *st) { (void)st; }
drift_status drift_store_put_prompts(drift_store *st, const drift_suite *suite, int64_t *rowids, drift_error *err) { (void)st; (void)suite; (void)rowids; return NI(err); }
drift_status drift_store_run_begin(drift_store *st, const drift_run_info *info, int64_t *run_id, int *resumed, drift_error *err) { (void)st; (void)info; (void)run_id; (void)resumed; return NI(err); }
drift_status drift_store_run_finish(drift_store *st, int64_t run_id, drift_error *err) { (void)st; (void)run_id; return NI(err); }
drift_status drift_store_run_get(drift_store *st, const char *label, drift_run_info *out, drift_error *err) { (void)st; (void)label; (void)out; return NI(err); }
drift_status drift_store_run_list(drift_store *st, drift_run_info **out, size_t *n, drift_error *err) { (void)st; *out = NULL; *n = 0; return NI(err); }
void drift_run_info_free(drift_run_info *info) { (void)info; }
void drift_run_info_array_free(drift_run_info *infos, size_t n) { (void)n; free(infos); }
drift_status drift_store_put_responses(drift_store *st, int64_t run_id, const drift_response *r, size_t n, drift_error *err) { (void)st; (void)run_id; (void)r; (void)n; return NI(err); }
drift_status drift_store_pending(drift_store *st, int64_t run_id, const int64_t *prompt_rowids, size_t n_prompts, int replicates, int64_t **out_prompts, int **out_replicates, size_t *n_out, drift_error *err) { (void)st; (void)run_id; (void)prompt_rowids; (void)n_prompts; (void)replicates; *out_prompts = NULL; *out_replicates = NULL; *n_out = 0; return NI(err); }
drift_status drift_store_load_scored(drift_store *st, int64_t run_id, drift_scored_set *out, drift_error *err) { (void)st; (void)run_id; (void)out; return NI(err); }
void drift_scored_set_free(drift_scored_set *s) { (void)s; }
drift_status drift_store_response_get(drift_store *st, int64_t response_id, drift_response *out, drift_prompt *prompt_out, drift_error *err) { (void)st; (void)response_id; (void)out; (void)prompt_out; return NI(err); }
void drift_response_free(drift_response *r) { (void)r; }
void drift_prompt_free(drift_prompt *p) { (void)p; }
drift_status drift_store_unscored(drift_store *st, int64_t run_id, const char *evaluator, size_t limit, drift_response **resp, drift_prompt **prompts, size_t *n, drift_error *err) { (void)st; (void)run_id; (void)evaluator; (void)limit; *resp = NULL; *prompts = NULL; *n = 0; return NI(err); }
drift_status drift_store_put_scores(drift_store *st, const drift_score *s, size_t n, drift_error *err) { (void)st; (void)s; (void)n; return NI(err); }
drift_status drift_store_put_embedding(drift_store *st, int64_t response_id, const char *embedder, const float *vec, int dim, drift_error *err) { (void)st; (void)response_id; (void)embedder; (void)vec; (void)dim; return NI(err); }
drift_status drift_store_get_embedding(drift_store *st, int64_t response_id, const char *embedder, float **vec, int *dim, drift_error *err) { (void)st; (void)response_id; (void)embedder; *vec = NULL; *dim = 0; return NI(err); }
struct sqlite3 *drift_store_db(drift_store *st) { (void)st; return NULL; }
