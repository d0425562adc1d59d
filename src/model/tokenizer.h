/* tokenizer.h - tokenizers from GGUF metadata (internal).
 *
 * tokenizer.ggml.model = "gpt2":  GPT-2 byte-level BPE. Text is split on
 *   special tokens, then by the pre-tokenizer regex named by
 *   tokenizer.ggml.pre ("llama-bpe"/"llama3", "qwen2", "default"/"gpt2"; any
 *   other name falls back to the GPT-2 regex and tok_pre_name says so), each
 *   piece's bytes are mapped to printable code points (GPT-2's bytes_to_unicode)
 *   and merged by rank (tokenizer.ggml.merges, "left right").
 * tokenizer.ggml.model = "llama": SentencePiece BPE. Spaces become U+2581,
 *   a U+2581 is prepended (tokenizer.ggml.add_space_prefix, default true),
 *   characters are merged by the highest score of the merged piece
 *   (tokenizer.ggml.scores), unknown characters fall back to <0xXX> byte tokens.
 * Control (type 3) and user-defined (type 4) tokens are matched verbatim in
 * the text before BPE when parse_special is set (longest match first). */
#ifndef DRIFT_TOKENIZER_H
#define DRIFT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"
#include "model/gguf.h"
#include "util/util.h"

typedef enum tok_kind { TOK_KIND_BPE = 0, TOK_KIND_SPM = 1 } tok_kind;

/* token_type values (llama.cpp's) */
enum { TOK_TYPE_NORMAL = 1, TOK_TYPE_UNKNOWN = 2, TOK_TYPE_CONTROL = 3, TOK_TYPE_USER = 4, TOK_TYPE_UNUSED = 5, TOK_TYPE_BYTE = 6 };

typedef struct drift_tokenizer drift_tokenizer;

/* Builds the tokenizer of a GGUF file (copies what it needs: the file may be
 * closed afterwards). Missing/inconsistent tokenizer keys -> DRIFT_ERR_PARSE
 * naming the key; an unknown tokenizer.ggml.model -> DRIFT_ERR_UNSUPPORTED. */
drift_status tok_load(const gguf_file *f, drift_tokenizer **out, drift_error *err);
void tok_free(drift_tokenizer *t);

/* Encodes len bytes of text (any bytes; invalid UTF-8 is kept byte-exact).
 * add_bos prepends BOS when the model has one. parse_special: control and
 * user-defined token texts in the input become those tokens. *ids malloc'd. */
drift_status tok_encode(const drift_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
                        int32_t **ids, size_t *n, drift_error *err);

/* Appends the bytes of token id to out. Control tokens produce nothing unless
 * render_special. Returns 0, or -1 on a bad id / out of memory. */
int tok_decode_token(const drift_tokenizer *t, int32_t id, int render_special, util_buf *out);
/* Decodes a sequence; SPM drops the one leading space the encoder added when
 * the first token is at the start of the text (strip_prefix_space). malloc'd. */
char *tok_decode(const drift_tokenizer *t, const int32_t *ids, size_t n, int strip_prefix_space, size_t *len_out);

int tok_n_vocab(const drift_tokenizer *t);
int32_t tok_bos(const drift_tokenizer *t);   /* -1 none */
int32_t tok_eos(const drift_tokenizer *t);   /* -1 none */
int tok_add_bos_default(const drift_tokenizer *t);
/* End of generation: EOS, EOT (tokenizer.ggml.eot_token_id) or one of the
 * well-known end markers present as control tokens (<|eot_id|>, <|im_end|>,
 * <|end|>, <|endoftext|>). */
int tok_is_eog(const drift_tokenizer *t, int32_t id);
int32_t tok_find(const drift_tokenizer *t, const char *piece); /* -1 absent */
const char *tok_piece(const drift_tokenizer *t, int32_t id);   /* raw vocabulary text */
tok_kind tok_get_kind(const drift_tokenizer *t);
const char *tok_pre_name(const drift_tokenizer *t);            /* regex used: "llama3", "qwen2", "gpt2", "spm" */

#endif
