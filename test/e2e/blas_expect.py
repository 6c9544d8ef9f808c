"""The OpenBLAS kernel set par's runtime should choose on this CPU, from
/proc/cpuinfo's flags, independently of the runtime's CPUID code
(blas-kernels.test): AVX-512 F/DQ/CD/BW/VL -> SkylakeX, with AVX512_BF16 ->
Cooperlake; AVX2 and FMA -> Haswell; otherwise whatever OpenBLAS was told
(printed as "keep"). The runtime upgrades only, so a set named with
OPENBLAS_CORETYPE that is as strong stays.

usage: blas_expect.py FORCED_CORETYPE
"""
import sys

STRENGTH = {"cooperlake": 3, "sapphirerapids": 3, "skylakex": 2,
            "haswell": 1, "zen": 1, "excavator": 1}


def best():
    flags = set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        return None
    if {"avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"} <= flags:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def main():
    forced = sys.argv[1]
    b = best()
    if b is None or STRENGTH.get(b.lower(), 0) <= STRENGTH.get(forced.lower(), 0):
        print("expect %s kernels" % forced)
        print("expect why: (OPENBLAS_CORETYPE=%s)" % forced)
    else:
        print("expect %s kernels" % b)
        print("expect why: ; instead of OPENBLAS_CORETYPE=%s;" % forced)


if __name__ == "__main__":
    main()
