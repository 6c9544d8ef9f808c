#!/usr/bin/env python3
"""par-compile: turn a model (unsharded MLIR with par annotations) into a
compiled artifact directory that par-run executes:

  OUT/sharded.mlir     the SPMD program (after --par-spmd)
  OUT/sharded.json     its manifest (mesh, per-tensor global/local shapes, shardings)
  OUT/sharded.so       the compiled SPMD program (entry: par_packed_<name>)
  OUT/reference.json   manifest of the unsharded program (one device)
  OUT/reference.so     the unsharded program, for par-run --verify

Usage: par-compile MODEL.mlir -o OUT [--no-reference] [--keep-temps]
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LLVM_BIN = os.environ.get("PAR_LLVM_BIN", "/usr/lib/llvm-22/bin")


def die(msg):
    print(f"par-compile: error: {msg}", file=sys.stderr)
    sys.exit(1)


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        die(f"'{os.path.basename(cmd[0])}' failed (exit {proc.returncode})")
    return proc


def find_tool(name, dirs):
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    found = shutil.which(name)
    if not found:
        die(f"cannot find '{name}' (looked in {', '.join(dirs)})")
    return found


def build(par_opt, model, out, stem, pre_flags, lib_dir, keep):
    spmd = os.path.join(out, f"{stem}.mlir")
    manifest = os.path.join(out, f"{stem}.json")
    llvm_mlir = os.path.join(out, f"{stem}.llvm.mlir")
    ll = os.path.join(out, f"{stem}.ll")
    obj = os.path.join(out, f"{stem}.o")
    so = os.path.join(out, f"{stem}.so")
    run([par_opt, model, *pre_flags, "-o", spmd])
    run([par_opt, spmd, f"--par-export-manifest=output={manifest}",
         "--par-lower-cpu", "-o", llvm_mlir])
    run([os.path.join(LLVM_BIN, "mlir-translate"), "--mlir-to-llvmir",
         llvm_mlir, "-o", ll])
    # LLVM's optimiser (vectorisation, LICM, ...) before code generation,
    # for the machine par-run will run on.
    opt_ll = ll + ".opt.ll"
    run([os.path.join(LLVM_BIN, "opt"), "-O3", ll, "-S", "-o", opt_ll])
    run([os.path.join(LLVM_BIN, "llc"), "-O3", "-mcpu=native",
         "-relocation-model=pic", "-filetype=obj", opt_ll, "-o", obj])
    cxx = os.environ.get("CXX", "c++")
    # libpar_runtime.so also provides memrefCopy (strided copies), so the
    # artifact needs no MLIR library at run time.
    run([cxx, "-shared", "-o", so, obj, f"-L{lib_dir}", "-lpar_runtime",
         f"-Wl,-rpath,{lib_dir}", "-lm"])
    if not keep:
        for f in (llvm_mlir, ll, opt_ll, obj):
            os.unlink(f)


def main():
    ap = argparse.ArgumentParser(prog="par-compile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("-o", "--output", required=True, help="artifact directory")
    ap.add_argument("--no-reference", action="store_true",
                    help="do not build the unsharded reference")
    ap.add_argument("--keep-temps", action="store_true")
    args = ap.parse_args()
    if not os.path.isfile(args.model):
        die(f"cannot open model '{args.model}'")
    build_dir = os.path.dirname(HERE)
    par_opt = find_tool("par-opt", [HERE])
    lib_dir = os.path.join(build_dir, "lib")
    if not os.path.isfile(os.path.join(lib_dir, "libpar_runtime.so")):
        die(f"cannot find libpar_runtime.so in {lib_dir}")
    os.makedirs(args.output, exist_ok=True)
    build(par_opt, args.model, args.output, "sharded", ["--par-spmd"],
          lib_dir, args.keep_temps)
    if not args.no_reference:
        build(par_opt, args.model, args.output, "reference",
              ["--par-strip-shardings", "--par-split-constants",
               "--canonicalize", "--cse"], lib_dir, args.keep_temps)
    print(f"par-compile: wrote {args.output}")


if __name__ == "__main__":
    main()
