"""Writes safetensors files whose headers are malformed, one defect each,
for weights-malformed.test: python malformed_safetensors.py DIR.

Each file holds (or claims to hold) the one tensor 'w', F32 [2, 8], of
Inputs/fused-segments.mlir; the defect is named by the file's name."""
import json
import os
import struct
import sys

out = sys.argv[1]
DATA = bytes(64)  # F32 [2, 8]
GOOD = {"dtype": "F32", "shape": [2, 8], "data_offsets": [0, 64]}


def write(name, header, data=DATA, size=None):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    n = len(raw) if size is None else size
    with open(os.path.join(out, name + ".safetensors"), "wb") as f:
        f.write(struct.pack("<Q", n) + raw + data)


write("short", b"", data=b"", size=None)          # 8 bytes: a header of 0
open(os.path.join(out, "tiny.safetensors"), "wb").write(b"\x05\x00")
write("oversize", {"w": GOOD}, size=1 << 40)       # claims 1 TiB of header
write("notjson", b"{\"w\": {\"dtype\": \"F32\",")
write("array", [GOOD])
write("nodtype", {"w": {"shape": [2, 8], "data_offsets": [0, 64]}})
write("offsets", {"w": {"dtype": "F32", "shape": [2, 8], "data_offsets": [0]}})
write("negshape", {"w": {"dtype": "F32", "shape": [2, -8], "data_offsets": [0, 64]}})
write("outside", {"w": {"dtype": "F32", "shape": [2, 8], "data_offsets": [0, 640]}})
write("bytes", {"w": {"dtype": "F32", "shape": [2, 8], "data_offsets": [0, 60]}})
write("overlap", {"w": GOOD, "v": {"dtype": "F32", "shape": [2], "data_offsets": [56, 64]}})
