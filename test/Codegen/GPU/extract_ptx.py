"""Writes the PTX of every gpu.binary (format=isa) in an MLIR file to
OUT_PREFIX<N>.ptx, one file per object, and prints their names. MLIR prints
the assembly as a string attribute with \\XX hex escapes."""
import re
import sys


def unescape(s):
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 2 < len(s) + 1 and re.match(r"[0-9A-Fa-f]{2}", s[i + 1:i + 3]):
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
        elif c == "\\" and i + 1 < len(s):
            out.extend(s[i + 1].encode())
            i += 2
        else:
            out.extend(c.encode())
            i += 1
    return out.decode()


def main():
    text = open(sys.argv[1]).read()
    prefix = sys.argv[2]
    objects = re.findall(r'#gpu\.object<#nvvm\.target<[^>]*>(?:, properties = \{[^}]*\})?, (?:assembly = )?"((?:[^"\\]|\\.)*)"', text)
    if not objects:
        sys.exit("extract_ptx: no #gpu.object with an assembly string in " + sys.argv[1])
    for n, obj in enumerate(objects):
        ptx = unescape(obj)
        if ".target sm_" not in ptx:
            sys.exit("extract_ptx: object %d is not PTX" % n)
        name = "%s%d.ptx" % (prefix, n)
        with open(name, "w") as f:
            f.write(ptx)
        print(name)


main()
