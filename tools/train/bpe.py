"""bpe.py - GPT-2 style byte-level BPE: training, encoding, decoding.

Pure Python (no numpy, no `regex` module) so it runs the same on the CPU
machine and on the GPU machine. The pre-tokenizer is GPT-2's ("gpt-2" in
GGUF, RE_GPT2 in src/model/tokenizer.c):

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

emulated with `re`: \\p{L} -> [^\\W\\d_], \\p{N} -> \\d. The two agree on ASCII
and on ordinary Unicode letters and decimal digits (they differ only for
non-decimal numerals such as U+2167), and the training text is ASCII; the
GGUF test in tools/train/README checks the engine's ids against ours.

Vocabulary layout (ids): 0..255 the 256 byte symbols in byte order, then the
merges in rank order, then the special tokens (CONTROL type in GGUF).
Merging: repeatedly the pair of lowest rank, leftmost first, as the engine
(tokenizer.c merge_word) does.
"""
import collections
import json
import re

# '_' is \w in Python but neither \p{L} nor \p{N} in PCRE: it belongs to the punctuation class
PUNCT = r"(?:[^\s\w]|_)"
PAT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?" + PUNCT + r"+|\s+(?!\S)|\s+")
# llama.cpp's "qwen2" (RE_QWEN2 in tokenizer.c): one digit a piece, a letter run may take one leading
# non-letter non-digit (not CR/LF), punctuation runs take trailing newlines:
#   (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
#   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
PAT_QWEN2 = re.compile(r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|(?:[^\r\n\w]|_)?[^\W\d_]+|\d|"
                       r" ?" + PUNCT + r"+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PATTERNS = {"gpt-2": PAT, "qwen2": PAT_QWEN2}

SPECIALS = ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"]


def bytes_to_unicode():
    """GPT-2's byte -> printable code point table (tokenizer.c init_byte_tables)."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


def pretokenize(text, pre="gpt-2"):
    return PATTERNS[pre].findall(text)


def word_symbols(word):
    return tuple(B2U[b] for b in word.encode("utf-8"))


def merge_symbols(syms, rank):
    """Applies the merges to a word's symbols (a list, changed in place and
    returned): the adjacent pair of lowest rank first, the leftmost on a tie,
    until no adjacent pair has a rank."""
    while len(syms) > 1:
        best, bi = None, -1
        for i in range(len(syms) - 1):
            r = rank.get((syms[i], syms[i + 1]))
            if r is not None and (best is None or r < best):
                best, bi = r, i
        if best is None:
            break
        syms[bi:bi + 2] = [syms[bi] + syms[bi + 1]]
    return syms


def train(texts, vocab_size, specials=SPECIALS, min_count=2, log=None, pre="gpt-2"):
    """Learns merges from an iterable of strings. Returns (tokens, merges)
    where tokens is the list of token strings (byte-level unicode form) and
    merges the list of "a b" strings in rank order."""
    counts = collections.Counter()
    for t in texts:
        counts.update(pretokenize(t, pre))
    words = [list(word_symbols(w)) for w in counts]
    freq = [counts[w] for w in counts]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for i, (w, f) in enumerate(zip(words, freq)):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += f
            where[(a, b)].add(i)
    tokens = [B2U[b] for b in range(256)]
    merges = []
    n_merges = vocab_size - 256 - len(specials)
    while len(merges) < n_merges and pair_count:
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))  # deterministic tie-break
        (a, b), c = best
        if c < min_count:
            break
        merges.append(a + " " + b)
        ab = a + b
        tokens.append(ab)
        for i in list(where[(a, b)]):
            w, f = words[i], freq[i]
            # remove old pairs of this word
            for p in zip(w, w[1:]):
                pair_count[p] -= f
                if pair_count[p] <= 0:
                    del pair_count[p]
                where[p].discard(i)
            j, nw = 0, []
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    nw.append(ab)
                    j += 2
                else:
                    nw.append(w[j])
                    j += 1
            words[i] = nw
            for p in zip(nw, nw[1:]):
                pair_count[p] += f
                where[p].add(i)
        where.pop((a, b), None)
        if log and len(merges) % 500 == 0:
            log("bpe: %d merges" % len(merges))
    tokens.extend(specials)
    return tokens, merges


class Tokenizer:
    def __init__(self, tokens, merges, specials=SPECIALS, pre="gpt-2"):
        self.pre = pre
        self.pat = PATTERNS[pre]
        self.tokens = list(tokens)
        self.merges = list(merges)
        self.rank = {tuple(m.split(" ")): i for i, m in enumerate(merges)}
        self.id = {}
        for i, t in enumerate(self.tokens):
            self.id.setdefault(t, i)
        self.specials = list(specials)
        self.cache = {}

    @classmethod
    def load(cls, path):
        with open(path) as f:
            d = json.load(f)
        return cls(d["tokens"], d["merges"], d["specials"], d.get("pre", "gpt-2"))

    def save(self, path):
        with open(path, "w") as f:
            json.dump({"tokens": self.tokens, "merges": self.merges, "specials": self.specials, "pre": self.pre}, f)

    def special(self, name):
        return self.id[name]

    def bpe(self, word):
        syms = merge_symbols(list(word_symbols(word)), self.rank)
        return [self.id[s] for s in syms]

    def encode(self, text):
        """Ids of text as raw text (special-token texts are not parsed), no BOS."""
        out = []
        cache = self.cache
        for w in self.pat.findall(text):
            ids = cache.get(w)
            if ids is None:
                ids = self.bpe(w)
                if len(cache) < 500000:
                    cache[w] = ids
            out.extend(ids)
        return out

    def decode(self, ids):
        bs = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in self.specials:
                continue
            bs.extend(U2B[ch] for ch in t)
        return bs.decode("utf-8", errors="replace")
