// The cuda lowering of a matmul + GELU + softmax program and a bf16 one
// (Inputs/matmul-gelu-softmax.mlir), to PTX kept in the module:
// RUN: par-opt %S/Inputs/matmul-gelu-softmax.mlir --par-lower-gpu="format=isa toolkit=%cuda_toolkit" -o %t.mlir
// RUN: FileCheck %s --check-prefix=HOST < %t.mlir
// RUN: FileCheck %s --check-prefix=PTX < %t.mlir
// ptxas accepts the PTX for sm_90:
// RUN: %python %S/extract_ptx.py %t.mlir %t.kernels > %t.list
// RUN: %cuda_toolkit/bin/ptxas -arch=sm_90 %t.kernels0.ptx -o %t.cubin
// The default format is a fatbin (ptxas and fatbinary at compile time):
// RUN: par-opt %S/Inputs/matmul-gelu-softmax.mlir --par-lower-gpu="toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=FATBIN
// REQUIRES: cuda-toolkit

// Five kernels for @mgs: the GELU chain (one fused kernel), and the
// softmax's max, exp, sum and division (its fills folded into the
// reductions); the matmul is a cuBLAS call through the runtime that
// overwrites C (accumulate 0: its zero fill folded away). All on one
// stream, synchronized once, at the end; temporaries in device memory
// from the runtime's pool.
// HOST-LABEL: llvm.func @mgs(
// HOST-DAG:     %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// HOST-NOT:     gpu.launch_func
// HOST:         llvm.call @par_rt_k_matmul({{.*}}, %[[ZERO]])
// HOST:         %[[S:.*]] = llvm.call @mgpuStreamCreate()
// HOST-COUNT-5: gpu.launch_func <%[[S]] : !llvm.ptr>
// HOST-NOT:     gpu.launch_func
// HOST:         llvm.call @mgpuMemFree
// HOST-NEXT:    llvm.call @mgpuStreamSynchronize
// HOST-NEXT:    llvm.call @mgpuStreamDestroy
// HOST-NEXT:    llvm.return
// HOST:         gpu.binary @par_kernels
// HOST-NOT:     gpu.binary
// HOST-LABEL: llvm.func @mgs_bf16(
// HOST-COUNT-1: gpu.launch_func
// HOST-NOT:     gpu.launch_func
// HOST:         llvm.return
// The session's one signature: outputs are trailing out-parameters.
// HOST-LABEL: llvm.func @par_packed_mgs(
// HOST:         llvm.call @_mlir_ciface_mgs(%{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()

// bf16 arithmetic is native, reductions are block-wide (shuffles and a
// barrier), libdevice is linked (no unresolved __nv_ calls remain).
// PTX: gpu.binary @par_kernels
// PTX-SAME: .target sm_90
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: bar.sync
// PTX-SAME: add.rn.bf16
// PTX-SAME: cvt.rn.bf16.f32
// PTX-NOT: __nv_

// (ISAToBinaryTimeInMs: ptxas ran; "P\EDU\BA" is the fatbin magic 0xBA55ED50.)
// FATBIN: gpu.binary @par_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">, properties = {ISAToBinaryTimeInMs = {{.*}}}, "P\EDU\BA
