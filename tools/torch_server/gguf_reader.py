"""gguf_reader.py - a GGUF (v2/v3) reader for the PyTorch server: header, metadata, tensor infos, tensor data.

The file is memory-mapped; every length, count and offset read from it is checked against the file's size
before it is used, so a truncated or corrupt file raises GGUFError naming the file and the field, never an
IndexError or a huge allocation. Tensor data is returned as a float32 numpy array in PyTorch's dimension
order (reversed ne: a ggml matrix with ne = [in, out] becomes shape (out, in)).

Types dequantised: F32, F16, BF16, F64, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K (the block layouts of
ggml's ggml-common.h, written here from their definitions). The shipped models are F16 + F32; the others are
what llama.cpp's llama-quantize writes for Q8_0 / Q4_0 / Q4_K_M files (K-quant tensors whose row length is not a
multiple of 256 fall back to Q5_0 / Q5_1 / Q8_0 there). Q8_0, Q4_0, Q4_K, Q5_K and Q6_K were checked against the
engine's decoders on the same bytes (requant.py); the engine has no Q4_1 / Q5_0 / Q5_1, so those follow ggml's
definitions unchecked.
"""
import mmap
import struct

import numpy as np

MAGIC = b"GGUF"
(T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64, T_INT64,
 T_FLOAT64) = range(13)
SCALAR = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f",
          T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d"}

F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = 0, 1, 2, 3, 6, 7, 8
Q4_K, Q5_K, Q6_K, F64, BF16 = 12, 13, 14, 28, 30
# type -> (elements per block, bytes per block, name)
BLOCK = {F32: (1, 4, "F32"), F16: (1, 2, "F16"), BF16: (1, 2, "BF16"), F64: (1, 8, "F64"), Q8_0: (32, 34, "Q8_0"),
         Q4_0: (32, 18, "Q4_0"), Q4_1: (32, 20, "Q4_1"), Q5_0: (32, 22, "Q5_0"), Q5_1: (32, 24, "Q5_1"),
         Q4_K: (256, 144, "Q4_K"), Q5_K: (256, 176, "Q5_K"), Q6_K: (256, 210, "Q6_K")}

MAX_DIMS = 4
MAX_COUNT = 1 << 28  # metadata arrays / tensors / keys: more than any real file has


class GGUFError(Exception):
    pass


class TensorInfo:
    __slots__ = ("name", "ne", "type", "offset", "nbytes")

    def __init__(self, name, ne, typ, offset, nbytes):
        self.name, self.ne, self.type, self.offset, self.nbytes = name, ne, typ, offset, nbytes

    @property
    def shape(self):
        return tuple(reversed(self.ne))

    @property
    def type_name(self):
        return BLOCK[self.type][2]


class GGUFFile:
    """kv: {key: value} (arrays as lists, strings as str); tensors: {name: TensorInfo} (file order kept)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            try:
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError as e:  # empty file
                raise GGUFError("%s: cannot map the file (%s)" % (path, e)) from None
        self._buf = memoryview(self._mm)
        self.kv = {}
        self.tensors = {}
        try:
            self._parse()
        except struct.error as e:
            raise GGUFError("%s: truncated header (%s)" % (path, e)) from None

    def _need(self, pos, n, what):
        if n < 0 or pos + n > len(self._buf):
            raise GGUFError("%s: %s at byte %d needs %d bytes, the file has %d" % (self.path, what, pos, n, len(self._buf)))

    def _str(self, pos, what):
        self._need(pos, 8, what)
        (n,) = struct.unpack_from("<Q", self._buf, pos)
        self._need(pos + 8, n, what)
        try:
            return bytes(self._buf[pos + 8:pos + 8 + n]).decode("utf-8"), pos + 8 + n
        except UnicodeDecodeError:
            raise GGUFError("%s: %s at byte %d is not valid UTF-8" % (self.path, what, pos)) from None

    def _value(self, t, pos, key, depth=0):
        if t == T_STRING:
            return self._str(pos, "value of " + key)
        if t == T_ARRAY:
            if depth:
                raise GGUFError("%s: %s: nested arrays are not supported" % (self.path, key))
            self._need(pos, 12, "array header of " + key)
            et, n = struct.unpack_from("<IQ", self._buf, pos)
            pos += 12
            if n > MAX_COUNT:
                raise GGUFError("%s: %s: array of %d elements" % (self.path, key, n))
            if et in SCALAR:
                sz = struct.calcsize(SCALAR[et])
                self._need(pos, n * sz, "array of " + key)
                out = list(struct.unpack_from("<%d%s" % (n, SCALAR[et][1]), self._buf, pos))
                return out, pos + n * sz
            if et != T_STRING:
                raise GGUFError("%s: %s: array element type %d unknown" % (self.path, key, et))
            out = []
            for _ in range(n):
                v, pos = self._str(pos, "array of " + key)
                out.append(v)
            return out, pos
        if t not in SCALAR:
            raise GGUFError("%s: %s: value type %d unknown" % (self.path, key, t))
        sz = struct.calcsize(SCALAR[t])
        self._need(pos, sz, "value of " + key)
        return struct.unpack_from(SCALAR[t], self._buf, pos)[0], pos + sz

    def _parse(self):
        b = self._buf
        self._need(0, 24, "header")
        if bytes(b[:4]) != MAGIC:
            raise GGUFError("%s: not a GGUF file (magic %r)" % (self.path, bytes(b[:4])))
        (ver,) = struct.unpack_from("<I", b, 4)
        if ver not in (2, 3):
            raise GGUFError("%s: GGUF version %d (2 and 3 are supported)" % (self.path, ver))
        n_t, n_kv = struct.unpack_from("<QQ", b, 8)
        if n_t > MAX_COUNT or n_kv > MAX_COUNT:
            raise GGUFError("%s: header claims %d tensors and %d keys" % (self.path, n_t, n_kv))
        pos = 24
        for i in range(n_kv):
            key, pos = self._str(pos, "key %d" % i)
            self._need(pos, 4, "type of " + key)
            (t,) = struct.unpack_from("<I", b, pos)
            self.kv[key], pos = self._value(t, pos + 4, key)
        align = self.kv.get("general.alignment", 32)
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise GGUFError("%s: general.alignment %r is not a power of two" % (self.path, align))
        infos = []
        for i in range(n_t):
            name, pos = self._str(pos, "tensor name %d" % i)
            self._need(pos, 4, "dimensions of " + name)
            (nd,) = struct.unpack_from("<I", b, pos)
            if nd < 1 or nd > MAX_DIMS:
                raise GGUFError("%s: tensor %s has %d dimensions" % (self.path, name, nd))
            self._need(pos + 4, 8 * nd + 12, "info of " + name)
            ne = list(struct.unpack_from("<%dQ" % nd, b, pos + 4))
            typ, off = struct.unpack_from("<IQ", b, pos + 4 + 8 * nd)
            pos += 4 + 8 * nd + 12
            if typ not in BLOCK:
                raise GGUFError("%s: tensor %s: ggml type %d is not supported (supported: %s)" %
                                (self.path, name, typ, ", ".join(v[2] for v in BLOCK.values())))
            per, nbytes_blk, tname = BLOCK[typ]
            if any(d <= 0 or d > (1 << 40) for d in ne):
                raise GGUFError("%s: tensor %s: bad dimensions %s" % (self.path, name, ne))
            if ne[0] % per:
                raise GGUFError("%s: tensor %s: row of %d is not a multiple of %s's block of %d" % (self.path, name, ne[0], tname, per))
            n = 1
            for d in ne:
                n *= d
            if name in self.tensors:
                raise GGUFError("%s: tensor %s appears twice" % (self.path, name))
            ti = TensorInfo(name, ne, typ, off, n // per * nbytes_blk)
            self.tensors[name] = ti
            infos.append(ti)
        self.data_start = (pos + align - 1) // align * align
        for ti in infos:
            if ti.offset % align:
                raise GGUFError("%s: tensor %s: offset %d is not aligned to %d" % (self.path, ti.name, ti.offset, align))
            self._need(self.data_start + ti.offset, ti.nbytes, "data of tensor " + ti.name)

    def raw(self, name):
        ti = self.tensors[name]
        s = self.data_start + ti.offset
        return np.frombuffer(self._mm, dtype=np.uint8, count=ti.nbytes, offset=s)

    def tensor(self, name):
        """float32 numpy array of tensor NAME, shape reversed(ne)."""
        if name not in self.tensors:
            raise GGUFError("%s: tensor %s is missing" % (self.path, name))
        ti = self.tensors[name]
        out = dequantize(self.raw(name), ti.type, _count(ti.ne))
        if not np.all(np.isfinite(out)):
            raise GGUFError("%s: tensor %s holds non-finite values" % (self.path, name))
        return out.reshape(ti.shape)

    def close(self):
        self._buf.release()
        try:
            self._mm.close()
        except BufferError:  # numpy views still alive; the map goes with them
            pass


def _count(ne):
    n = 1
    for d in ne:
        n *= d
    return n


def _f16(a):
    return a.view(np.float16).astype(np.float32)


def _k_scales(sc):
    """Q4_K/Q5_K: the 8 (scale, min) 6-bit pairs of each block from its 12 bytes sc (nb, 12) -> two (nb, 8) arrays."""
    sc = sc.astype(np.uint8)
    s = np.empty((sc.shape[0], 8), np.uint8)
    m = np.empty((sc.shape[0], 8), np.uint8)
    s[:, :4] = sc[:, 0:4] & 63
    m[:, :4] = sc[:, 4:8] & 63
    s[:, 4:] = (sc[:, 8:12] & 0xF) | ((sc[:, 0:4] >> 6) << 4)
    m[:, 4:] = (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)
    return s.astype(np.float32), m.astype(np.float32)


def dequantize(raw, typ, n):
    """n float32 values of ggml type typ from the bytes raw (a uint8 array)."""
    if typ == F32:
        return raw.view(np.float32).copy()
    if typ == F16:
        return _f16(raw)
    if typ == F64:
        return raw.view(np.float64).astype(np.float32)
    if typ == BF16:
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    per, nbb, _ = BLOCK[typ]
    blk = raw.reshape(-1, nbb)
    nb = blk.shape[0]
    if typ == Q8_0:
        d = _f16(blk[:, 0:2].copy())
        q = blk[:, 2:34].view(np.int8).astype(np.float32)
        return (q * d).reshape(-1)
    if typ in (Q4_0, Q4_1):
        d = _f16(blk[:, 0:2].copy())
        qs = blk[:, 2:18] if typ == Q4_0 else blk[:, 4:20]
        q = np.concatenate([qs & 0xF, qs >> 4], 1).astype(np.float32)
        if typ == Q4_0:
            return ((q - 8) * d).reshape(-1)
        return (q * d + _f16(blk[:, 2:4].copy())).reshape(-1)
    if typ in (Q5_0, Q5_1):
        d = _f16(blk[:, 0:2].copy())
        o = 2 if typ == Q5_0 else 4
        qh = blk[:, o:o + 4].copy().view(np.uint32)  # (nb, 1)
        qs = blk[:, o + 4:o + 20]
        j = np.arange(16, dtype=np.uint32)
        h0 = ((qh >> j) << 4) & 0x10
        h1 = (qh >> (j + 12)) & 0x10
        q = np.concatenate([(qs & 0xF) | h0, (qs >> 4) | h1], 1).astype(np.float32)
        if typ == Q5_0:
            return ((q - 16) * d).reshape(-1)
        return (q * d + _f16(blk[:, 2:4].copy())).reshape(-1)
    if typ in (Q4_K, Q5_K):
        d = _f16(blk[:, 0:2].copy())
        dmin = _f16(blk[:, 2:4].copy())
        s, m = _k_scales(blk[:, 4:16])
        if typ == Q4_K:
            qs = blk[:, 16:144].reshape(nb, 4, 32)
            q = np.stack([qs & 0xF, qs >> 4], 2).reshape(nb, 8, 32).astype(np.float32)
        else:
            qh = blk[:, 16:48]  # (nb, 32)
            qs = blk[:, 48:176].reshape(nb, 4, 32)
            lo = np.stack([qs & 0xF, qs >> 4], 2).reshape(nb, 8, 32).astype(np.int32)
            bit = np.arange(8).reshape(1, 8, 1)
            hi = ((qh[:, None, :] >> bit) & 1).astype(np.int32) << 4
            q = (lo + hi).astype(np.float32)
        return (d[:, :, None] * s[:, :, None] * q - dmin[:, :, None] * m[:, :, None]).reshape(-1)
    if typ == Q6_K:
        ql = blk[:, 0:128].reshape(nb, 2, 64)
        qh = blk[:, 128:192].reshape(nb, 2, 32)
        sc = blk[:, 192:208].copy().view(np.int8).astype(np.float32).reshape(nb, 2, 8)
        d = _f16(blk[:, 208:210].copy())  # (nb, 1)
        q1 = (ql[:, :, 0:32] & 0xF) | (((qh >> 0) & 3) << 4)
        q2 = (ql[:, :, 32:64] & 0xF) | (((qh >> 2) & 3) << 4)
        q3 = (ql[:, :, 0:32] >> 4) | (((qh >> 4) & 3) << 4)
        q4 = (ql[:, :, 32:64] >> 4) | (((qh >> 6) & 3) << 4)
        q = np.stack([q1, q2, q3, q4], 2).astype(np.float32) - 32  # (nb, 2, 4, 32)
        # scale index within a 128-half: is = l / 16 (0 or 1) + 2 * quarter
        scl = sc.reshape(nb, 2, 4, 2)  # [half][quarter][l/16]
        scale = np.repeat(scl, 16, axis=3)  # (nb, 2, 4, 32)
        return (d[:, :, None, None] * scale * q).reshape(-1)
    raise GGUFError("ggml type %d not supported" % typ)
