"""tokenizer.py - the GGUF's byte-level BPE tokenizer and chat templates, token for token as the engine.

Mirrors src/model/tokenizer.c (tok_encode / tok_decode_token) and src/model/model_text.c:
- encode: the text is split at special-token texts (longest first; CONTROL tokens only when parse_special,
  USER_DEFINED tokens always), each fragment between them is pre-tokenized with the GGUF's pre-tokenizer
  regex and every word merged by BPE rank (lowest rank, leftmost first). The regexes and the byte table are
  tools/train/bpe.py's (checked there against the engine on 105,517 tokens), and so is the merge loop.
- decode: control tokens render as nothing; a piece's code points map back to bytes through GPT-2's
  byte table. Text is built as bytes, token by token, as the engine does.
- BOS: tokenizer.ggml.add_bos_token (default off for gpt2 vocabularies).
- end of generation: eos, eot, and the control tokens <|eot_id|> <|im_end|> <|end|> <|endoftext|>
  <|end_of_text|> <|eom_id|> where present (tokenizer.c's list).
- chat: the template is picked from the vocabulary as model_pick_template does (ChatML, Llama-3,
  <|user|>..<|end|> "phi3"); a conversation renders each message as the template's header (special tokens
  parsed) + the content (never parsed, its markers neutralised first) + its end marker, then the assistant
  header. For one user message this is exactly drift_model_chat_tokens.
- neutralise: drift_markers_neutralise (src/model/model_text.c), table for table: a U+200B ZERO WIDTH SPACE
  after the first character of every template marker in untrusted text ("<|", "[INST]", "</s>", ...), so a
  message cannot close its turn or plant one; text without markers is unchanged, and neutralising twice is
  neutralising once. tests/data/markers/cases.json holds the cases both are checked against
  (tests/e2e/template_markers.sh).
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import bpe  # noqa: E402  (tools/train/bpe.py: the pre-tokenizer regexes and GPT-2's byte table)

TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER, TYPE_UNUSED, TYPE_BYTE = 1, 2, 3, 4, 5, 6
EOG_NAMES = ["<|eot_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>"]


class TokenizerError(Exception):
    pass


# ---- markers in untrusted text: model_text.c's MARKERS, row for row (text, sets, line_start)
MARKER_SET_CHAT, MARKER_SET_LLAMAGUARD, MARKER_SET_GUARD = 1, 2, 4
MARKERS = [
    ("<|", MARKER_SET_CHAT, False),
    ("<\uff5c", MARKER_SET_CHAT, False),
    ("<s>", MARKER_SET_CHAT, False),
    ("</s>", MARKER_SET_CHAT, False),
    ("[INST]", MARKER_SET_CHAT, False),
    ("[/INST]", MARKER_SET_CHAT, False),
    ("<<SYS>>", MARKER_SET_CHAT, False),
    ("<</SYS>>", MARKER_SET_CHAT, False),
    ("<start_of_turn>", MARKER_SET_CHAT, False),
    ("<end_of_turn>", MARKER_SET_CHAT, False),
    ("<bos>", MARKER_SET_CHAT, False),
    ("<eos>", MARKER_SET_CHAT, False),
    ("<BEGIN", MARKER_SET_LLAMAGUARD, False),
    ("<END", MARKER_SET_LLAMAGUARD, False),
    ("Task: Check if there is unsafe content", MARKER_SET_LLAMAGUARD, False),
    ("Provide your safety assessment", MARKER_SET_LLAMAGUARD, False),
    ("First line must read", MARKER_SET_LLAMAGUARD, False),
    ("If unsafe, a second line must include", MARKER_SET_LLAMAGUARD, False),
    ("User:", MARKER_SET_LLAMAGUARD, True),
    ("Agent:", MARKER_SET_LLAMAGUARD, True),
    ("Request:", MARKER_SET_GUARD, True),
    ("Answer:", MARKER_SET_GUARD, True),
    ("Verdict:", MARKER_SET_GUARD, True),
    ("Is the answer safe or unsafe?", MARKER_SET_GUARD, False),
]
ZWSP = "\u200b"


# where some marker starts (ASCII letters in any case, as the C side's tolower on bytes < 0x80: re.ASCII keeps
# IGNORECASE from folding the Kelvin sign into "k")
_MARKER_STARTS = re.compile("(?=(?:%s))" % "|".join(re.escape(m) for m, _, _ in MARKERS), re.IGNORECASE | re.ASCII)


def _marker_at(marker, text, i):
    """marker at text[i:], ASCII letters in any case."""
    part = text[i:i + len(marker)]
    return len(part) == len(marker) and all(c == m or (c.isascii() and c.lower() == m.lower())
                                            for c, m in zip(part, marker))


def _line_start(text, i):
    """only spaces or tabs between the text's start or a line break and text[i]"""
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    return i == 0 or text[i - 1] in "\r\n"


def neutralise(text, sets=MARKER_SET_CHAT):
    """text with a U+200B after the first character of every marker of sets (see the module's docstring)."""
    out = []
    frm = 0
    for hit in _MARKER_STARTS.finditer(text):
        i = hit.start()
        if any((s & sets) and (not ls or _line_start(text, i)) and _marker_at(m, text, i) for m, s, ls in MARKERS):
            out.append(text[frm:i + 1])
            out.append(ZWSP)
            frm = i + 1
    out.append(text[frm:])
    return "".join(out)


class Tokenizer:
    def __init__(self, kv, path="model"):
        model = kv.get("tokenizer.ggml.model")
        if model != "gpt2":
            raise TokenizerError("%s: tokenizer.ggml.model %r is not supported (gpt2 byte-level BPE is)" % (path, model))
        self.pre = kv.get("tokenizer.ggml.pre", "gpt-2")
        if self.pre in ("default", "llama-bpe") or self.pre not in bpe.PATTERNS:
            raise TokenizerError("%s: pre-tokenizer %r is not supported (%s are)" % (path, self.pre, ", ".join(sorted(bpe.PATTERNS))))
        self.pat = bpe.PATTERNS[self.pre]
        toks = kv.get("tokenizer.ggml.tokens")
        merges = kv.get("tokenizer.ggml.merges")
        if not isinstance(toks, list) or not toks or not isinstance(merges, list):
            raise TokenizerError("%s: tokenizer.ggml.tokens / merges missing" % path)
        self.tokens = toks
        self.n_vocab = len(toks)
        types = kv.get("tokenizer.ggml.token_type") or [TYPE_NORMAL] * len(toks)
        if len(types) != len(toks):
            raise TokenizerError("%s: %d token types for %d tokens" % (path, len(types), len(toks)))
        self.types = types
        self.id = {}
        for i, t in enumerate(toks):
            self.id.setdefault(t, i)
        self.rank = {}
        for i, m in enumerate(merges):
            a, sep, b = m.partition(" ")
            if not sep:
                raise TokenizerError("%s: merge %d %r has no space" % (path, i, m))
            self.rank.setdefault((a, b), i)

        def get_id(key):
            v = kv.get(key)
            return v if isinstance(v, int) and 0 <= v < self.n_vocab else -1

        self.bos = get_id("tokenizer.ggml.bos_token_id")
        self.eos = get_id("tokenizer.ggml.eos_token_id")
        self.eot = get_id("tokenizer.ggml.eot_token_id")
        self.add_bos = bool(kv.get("tokenizer.ggml.add_bos_token", False))
        self.eog = {i for i in (self.eos, self.eot) if i >= 0}
        for name in EOG_NAMES:
            i = self.id.get(name, -1)
            if i >= 0 and types[i] == TYPE_CONTROL:
                self.eog.add(i)
        self.special = sorted((i for i, t in enumerate(types) if t in (TYPE_CONTROL, TYPE_USER) and toks[i]),
                              key=lambda i: (-len(toks[i].encode("utf-8")), i))
        self.piece_bytes = [self._piece_bytes(i) for i in range(self.n_vocab)]
        self.cache = {}
        self.template = self._pick_template()

    def _piece_bytes(self, i):
        ty = self.types[i]
        t = self.tokens[i]
        if ty in (TYPE_CONTROL, TYPE_UNUSED):
            return b""
        if ty == TYPE_USER:
            return t.encode("utf-8")
        out = bytearray()
        for ch in t:
            b = bpe.U2B.get(ch)
            if b is not None:
                out.append(b)
            else:
                out.extend(ch.encode("utf-8"))
        return bytes(out)

    def _pick_template(self):
        has = lambda *names: all(self.id.get(n, -1) >= 0 for n in names)  # noqa: E731
        if has("<|im_start|>", "<|im_end|>"):
            return "chatml"
        if has("<|start_header_id|>", "<|eot_id|>"):
            return "llama3"
        if has("<|user|>", "<|assistant|>", "<|end|>"):
            return "phi3"
        return "none"

    # ---- encode
    def _bpe_word(self, word):
        syms = bpe.merge_symbols(list(bpe.word_symbols(word)), self.rank)
        out = []
        for s in syms:
            i = self.id.get(s)
            if i is not None:
                out.append(i)
            else:  # per-character fallback
                for ch in s:
                    j = self.id.get(ch)
                    if j is not None:
                        out.append(j)
        return out

    def _fragment(self, text, out):
        cache = self.cache
        for w in self.pat.findall(text):
            ids = cache.get(w)
            if ids is None:
                ids = self._bpe_word(w)
                if len(cache) < 200000:
                    cache[w] = ids
            out.extend(ids)

    def encode(self, text, add_bos=None, parse_special=False):
        """token ids of text; add_bos None = the model's default."""
        if add_bos is None:
            add_bos = self.add_bos
        out = [self.bos] if add_bos and self.bos >= 0 else []
        specials = [i for i in self.special if parse_special or self.types[i] != TYPE_CONTROL]
        pos = frag = 0
        n = len(text)
        while pos < n:
            hit = -1
            for i in specials:
                t = self.tokens[i]
                if text.startswith(t, pos):
                    hit = i
                    break
            if hit < 0:
                pos += 1
                continue
            if pos > frag:
                self._fragment(text[frag:pos], out)
            out.append(hit)
            pos += len(self.tokens[hit])
            frag = pos
        if n > frag:
            self._fragment(text[frag:], out)
        return out

    def chat(self, messages, add_generation_prompt=True, continue_final=False):
        """ids of a conversation [(role, content)] in the model's template, ending with the assistant header
        (add_generation_prompt); continue_final (vLLM's continue_final_message): the last message's end marker
        left out, so its content is the end of the prompt (what prompt_logprobs scores)."""
        parts = []  # (text, parse_special)
        t = self.template
        fold = t == "phi3" and self.id.get("<|system|>", -1) < 0  # no system turn: its text opens the next user turn
        pending = []
        for n, (role, content) in enumerate(messages):
            content = neutralise(content)
            if fold and role == "system" and n + 1 < len(messages):
                pending.append(content)
                continue
            if fold and role == "system":
                role = "user"
            if fold and role == "user" and pending:  # the text, then the blank line, each tokenized apart (as the engine)
                parts += [("<|user|>\n", True), ("\n\n".join(pending), False), ("\n\n", False), (content, False),
                          ("<|end|>\n", True)]
                pending = []
            elif t == "chatml":
                parts += [("<|im_start|>%s\n" % role, True), (content, False), ("<|im_end|>\n", True)]
            elif t == "llama3":
                parts += [("<|start_header_id|>%s<|end_header_id|>\n\n" % role, True), (content, False), ("<|eot_id|>", True)]
            elif t == "phi3":
                parts += [("<|%s|>\n" % role, True), (content, False), ("<|end|>\n", True)]
            else:
                parts += [(content, False)]
            if continue_final and n == len(messages) - 1 and t in ("chatml", "llama3", "phi3"):
                parts.pop()
        if add_generation_prompt and t == "chatml":
            parts.append(("<|im_start|>assistant\n", True))
        elif add_generation_prompt and t == "llama3":
            parts.append(("<|start_header_id|>assistant<|end_header_id|>\n\n", True))
        elif add_generation_prompt and t == "phi3":
            parts.append(("<|assistant|>\n", True))
        # adjacent marker texts are one encode call, as model_text.c's idvec_add_text calls
        merged = []
        for text, sp in parts:
            if merged and sp and merged[-1][1]:
                merged[-1] = (merged[-1][0] + text, True)
            else:
                merged.append((text, sp))
        ids = []
        for k, (text, sp) in enumerate(merged):
            ids += self.encode(text, add_bos=None if k == 0 else False, parse_special=sp)
        return ids

    # ---- decode
    def token_bytes(self, i):
        return self.piece_bytes[i] if 0 <= i < self.n_vocab else b""

    def token_text(self, i):
        return self.token_bytes(i).decode("utf-8", errors="replace")

    def decode(self, ids):
        if ids and ids[0] == self.bos:
            ids = ids[1:]
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")
