# Writes and compares .safetensors files with numpy alone (the format:
# u64 LE header size, JSON header, row-major little-endian data), for
# weights.test (no safetensors package needed).
#   make MANIFEST FUNC OUT [--seed S] [--drop NAME] [--as NAME=OTHER]
#        [--extra N] [--reshape NAME] [--f64 NAME] [--truncate]
#     a tensor for every named input of FUNC in the artifact's manifest,
#     random normal * 0.1; --drop leaves one out, --as stores one under
#     another name (an alias), --extra adds unused tensors, --reshape and
#     --f64 write one with a wrong shape or dtype, --truncate cuts the file.
#   compare A B      per name: "NAME equal" or "NAME differ (max |a-b| X)"
#   close A B TOL    every tensor of A is in B within TOL (max |a-b|)
#   tied F A B       whether tensors A and B of file F hold the same data
#   ids DIR VOCAB    result0.npy/result1.npy of DIR hold ids in [0, VOCAB)
#                    (every one of them), or (VOCAB 0) tokens and targets
#                    shifted by one
import json
import struct
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
          "I8": "|i1", "BOOL": "|b1"}


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + end],
                                  dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return out


def write(path, tensors, truncate=False):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        code = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64"}[a.dtype]
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": code, "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    data = struct.pack("<Q", len(h)) + h + b"".join(blobs)
    if truncate:
        data = data[:len(data) - 100]
    open(path, "wb").write(data)


def opt(args, flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default


def make(args):
    manifest, func, out = args[:3]
    fn = [f for f in json.load(open(manifest))["functions"] if f["name"] == func][0]
    rng = np.random.default_rng(int(opt(args, "--seed", "0")))
    renames = dict(a.split("=") for a in [opt(args, "--as")] if a)
    tensors = {}
    for t in fn["inputs"]:
        name = t.get("name")
        if not name or name == opt(args, "--drop"):
            continue
        shape = list(t["global_shape"])
        if name == opt(args, "--reshape"):
            shape[-1] += 1
        a = (rng.standard_normal(shape) * 0.1).astype(
            "<f8" if name == opt(args, "--f64") else "<f4")
        tensors[renames.get(name, name)] = a
    for k in range(int(opt(args, "--extra", "0"))):
        tensors["buffer%d.unused" % k] = np.zeros([2], "<f4")
    write(out, tensors, truncate="--truncate" in args)
    print("wrote %d tensors" % len(tensors))


def compare(a, b):
    x, y = read(a), read(b)
    for name in sorted(set(x) | set(y)):
        if name not in x or name not in y:
            print(name, "only in", a if name in x else b)
        elif x[name].shape != y[name].shape:
            print(name, "shapes differ", x[name].shape, y[name].shape)
        elif np.array_equal(x[name], y[name]):
            print(name, "equal")
        else:
            print(name, "differ (max |a-b| %.3g)" % np.abs(x[name] - y[name]).max())


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        make(args)
    elif cmd == "compare":
        compare(*args)
    elif cmd == "close":
        x, y = read(args[0]), read(args[1])
        worst = max(float(np.abs(x[n] - y[n]).max()) for n in x)
        print("%d tensors close: %s" % (len(x), worst <= float(args[2])))
    elif cmd == "ids":
        a, b = (np.load("%s/result%d.npy" % (args[0], k)) for k in (0, 1))
        v = int(args[1])
        if v:
            print("ids in [0, %d): %s, all used: %s" % (
                v, bool(a.min() >= 0 and a.max() < v and b.min() >= 0 and b.max() < v),
                len(set(a.ravel()) | set(b.ravel())) == v))
        else:
            print("targets are the tokens shifted: %s" % bool((a[:, 1:] == b[:, :-1]).all()))
    elif cmd == "tied":
        t = read(args[0])
        print("tied" if np.array_equal(t[args[1]], t[args[2]]) else "not tied")
