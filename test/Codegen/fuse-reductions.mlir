// par-fuse-reductions: LayerNorm and softmax, forward and backward (the
// forms par-decompose-aggregated-ops and par-autodiff emit), each become one
// loop nest (one scf.forall over blocks of rows holding the whole chain);
// through par-lower-cpu and LLVM's -O3 each loop body is vector code:
// vector fadds with reassoc and horizontal reductions (par-fast-math's
// reassociation), no libm exp calls (its polynomial exp). With
// fp-reassociate=false the reductions stay sequential (no vector
// reduce.fadd: the strict order cannot be vectorised). Kernels stay in
// their functions here (outline-kernels=false), so each function's checks
// see its own loops.
// RUN: par-opt %s --par-fuse-reductions=tile-elements=1024 -canonicalize -cse | FileCheck %s --check-prefix=NEST
// RUN: par-opt %s --par-lower-cpu=outline-kernels=false | mlir-translate --mlir-to-llvmir | opt -O3 -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64-v3 -S | FileCheck %s --check-prefix=VEC
// RUN: par-opt %s "--par-lower-cpu=fp-reassociate=false outline-kernels=false" | mlir-translate --mlir-to-llvmir | opt -O3 -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64-v3 -S | FileCheck %s --check-prefix=STRICT

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// NEST-LABEL: func.func @layernorm_fwd
// NEST-NOT:     linalg.generic
// NEST:         scf.forall (%{{.*}}) = (0) to (256) step (8)
// NEST-COUNT-4: linalg.generic
// NEST:         scf.forall.in_parallel
// NEST-NOT:     linalg.generic
// NEST:         return
// VEC-LABEL: define {{.*}} @layernorm_fwd(
// VEC:         fadd reassoc <8 x float>
// VEC:         call reassoc float @llvm.vector.reduce.fadd.v8f32
// VEC:         ret
// STRICT-LABEL: define {{.*}} @layernorm_fwd(
// STRICT-NOT:    llvm.vector.reduce.fadd
// STRICT:        ret
func.func @layernorm_fwd(%x: tensor<256x128xf32>, %g: tensor<128xf32>, %b: tensor<128xf32>) -> tensor<256x128xf32> {
  %zero = arith.constant 0.0 : f32
  %inv = arith.constant 7.812500e-03 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e = tensor.empty() : tensor<256x128xf32>
  %er = tensor.empty() : tensor<256xf32>
  %z = linalg.fill ins(%zero : f32) outs(%er : tensor<256xf32>) -> tensor<256xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<256x128xf32>) outs(%z : tensor<256xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<256xf32>
  %xc = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %sum : tensor<256x128xf32>, tensor<256xf32>) outs(%e : tensor<256x128xf32>) {
  ^bb0(%in: f32, %s: f32, %o: f32):
    %m = arith.mulf %s, %inv : f32
    %d = arith.subf %in, %m : f32
    linalg.yield %d : f32
  } -> tensor<256x128xf32>
  %var = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%xc : tensor<256x128xf32>) outs(%z : tensor<256xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<256xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%xc, %var, %g, %b : tensor<256x128xf32>, tensor<256xf32>, tensor<128xf32>, tensor<128xf32>) outs(%e : tensor<256x128xf32>) {
  ^bb0(%in: f32, %v: f32, %gg: f32, %bb: f32, %o: f32):
    %m = arith.mulf %v, %inv : f32
    %a = arith.addf %m, %eps : f32
    %r = math.rsqrt %a : f32
    %n = arith.mulf %in, %r : f32
    %t = arith.mulf %n, %gg : f32
    %u = arith.addf %t, %bb : f32
    linalg.yield %u : f32
  } -> tensor<256x128xf32>
  return %y : tensor<256x128xf32>
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
// NEST-LABEL: func.func @layernorm_bwd
// NEST-NOT:     linalg.generic
// NEST:         scf.forall (%{{.*}}) = (0) to (256) step (8)
// NEST-COUNT-3: linalg.generic
// NEST:         scf.forall.in_parallel
// NEST-NOT:     linalg.generic
// NEST:         return
// VEC-LABEL: define {{.*}} @layernorm_bwd(
// VEC:         fadd reassoc <8 x float>
// VEC:         call reassoc float @llvm.vector.reduce.fadd.v8f32
// VEC:         ret
func.func @layernorm_bwd(%dy: tensor<256x128xf32>, %xhat: tensor<256x128xf32>, %rstd: tensor<256xf32>, %gamma: tensor<128xf32>) -> tensor<256x128xf32> {
  %zero = arith.constant 0.0 : f32
  %inv = arith.constant 7.812500e-03 : f32
  %e = tensor.empty() : tensor<256x128xf32>
  %er = tensor.empty() : tensor<256xf32>
  %z = linalg.fill ins(%zero : f32) outs(%er : tensor<256xf32>) -> tensor<256xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #col, #row], iterator_types = ["parallel", "reduction"]} ins(%dy, %gamma : tensor<256x128xf32>, tensor<128xf32>) outs(%z : tensor<256xf32>) {
  ^bb0(%d: f32, %gm: f32, %a1: f32):
    %g = arith.mulf %d, %gm : f32
    %r = arith.addf %g, %a1 : f32
    linalg.yield %r : f32
  } -> tensor<256xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #id, #col, #row], iterator_types = ["parallel", "reduction"]} ins(%dy, %xhat, %gamma : tensor<256x128xf32>, tensor<256x128xf32>, tensor<128xf32>) outs(%z : tensor<256xf32>) {
  ^bb0(%d: f32, %xh: f32, %gm: f32, %a2: f32):
    %g = arith.mulf %d, %gm : f32
    %gx = arith.mulf %g, %xh : f32
    %r = arith.addf %gx, %a2 : f32
    linalg.yield %r : f32
  } -> tensor<256xf32>
  %dx = linalg.generic {indexing_maps = [#id, #id, #col, #row, #row, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%dy, %xhat, %gamma, %rstd, %s1, %s2 : tensor<256x128xf32>, tensor<256x128xf32>, tensor<128xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) outs(%e : tensor<256x128xf32>) {
  ^bb0(%d: f32, %xh: f32, %gm: f32, %r: f32, %v1: f32, %v2: f32, %o: f32):
    %g = arith.mulf %d, %gm : f32
    %m1 = arith.mulf %v1, %inv : f32
    %m2 = arith.mulf %v2, %inv : f32
    %t = arith.mulf %xh, %m2 : f32
    %u = arith.subf %g, %m1 : f32
    %v = arith.subf %u, %t : f32
    %w = arith.mulf %r, %v : f32
    linalg.yield %w : f32
  } -> tensor<256x128xf32>
  return %dx : tensor<256x128xf32>
}

// p = exp(x - max(x)) / sum(exp(x - max(x))).
// NEST-LABEL: func.func @softmax_fwd
// NEST-NOT:     linalg.generic
// NEST:         scf.forall (%{{.*}}) = (0) to (256) step (8)
// NEST-COUNT-4: linalg.generic
// NEST:         scf.forall.in_parallel
// NEST-NOT:     linalg.generic
// NEST:         return
// VEC-LABEL: define {{.*}} @softmax_fwd(
// VEC-NOT:     @expf
// VEC:         <8 x float>
// VEC:         call reassoc float @llvm.vector.reduce.fadd.v8f32
// VEC-NOT:     @expf
// VEC:         ret
func.func @softmax_fwd(%x: tensor<256x128xf32>) -> tensor<256x128xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x128xf32>
  %er = tensor.empty() : tensor<256xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%er : tensor<256xf32>) -> tensor<256xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<256x128xf32>) outs(%mi : tensor<256xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %mx = arith.maximumf %in, %acc : f32
    linalg.yield %mx : f32
  } -> tensor<256xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %m : tensor<256x128xf32>, tensor<256xf32>) outs(%e : tensor<256x128xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  } -> tensor<256x128xf32>
  %z = linalg.fill ins(%zero : f32) outs(%er : tensor<256xf32>) -> tensor<256xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%ex : tensor<256x128xf32>) outs(%z : tensor<256xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  } -> tensor<256xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%ex, %s : tensor<256x128xf32>, tensor<256xf32>) outs(%e : tensor<256x128xf32>) {
  ^bb0(%in: f32, %sv: f32, %o: f32):
    %q = arith.divf %in, %sv : f32
    linalg.yield %q : f32
  } -> tensor<256x128xf32>
  return %p : tensor<256x128xf32>
}

// dx = p * (dp - sum(dp * p)).
// NEST-LABEL: func.func @softmax_bwd
// NEST-NOT:     linalg.generic
// NEST:         scf.forall (%{{.*}}) = (0) to (256) step (8)
// NEST-COUNT-2: linalg.generic
// NEST:         scf.forall.in_parallel
// NEST-NOT:     linalg.generic
// NEST:         return
// VEC-LABEL: define {{.*}} @softmax_bwd(
// VEC:         fadd reassoc <8 x float>
// VEC:         call reassoc float @llvm.vector.reduce.fadd.v8f32
// VEC:         ret
func.func @softmax_bwd(%p: tensor<256x128xf32>, %dp: tensor<256x128xf32>) -> tensor<256x128xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x128xf32>
  %er = tensor.empty() : tensor<256xf32>
  %z = linalg.fill ins(%zero : f32) outs(%er : tensor<256xf32>) -> tensor<256xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]} ins(%p, %dp : tensor<256x128xf32>, tensor<256x128xf32>) outs(%z : tensor<256xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %m, %acc : f32
    linalg.yield %r : f32
  } -> tensor<256xf32>
  %dx = linalg.generic {indexing_maps = [#id, #id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %dp, %s : tensor<256x128xf32>, tensor<256x128xf32>, tensor<256xf32>) outs(%e : tensor<256x128xf32>) {
  ^bb0(%a: f32, %b: f32, %sv: f32, %o: f32):
    %d = arith.subf %b, %sv : f32
    %r = arith.mulf %a, %d : f32
    linalg.yield %r : f32
  } -> tensor<256x128xf32>
  return %dx : tensor<256x128xf32>
}
