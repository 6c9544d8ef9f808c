// RUN: par-opt %s --par-spmd --par-export-manifest -o /dev/null | FileCheck %s
// RUN: par-opt %s --par-spmd --par-export-manifest=output=%t.json -o /dev/null && FileCheck %s < %t.json
// RUN: par-opt %par_src_root/test/Pipelining/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 --par-autodiff "--par-optimizer=micro-batches=2" --par-pipeline-schedule --par-export-manifest=output=%t.pipe.json -o /dev/null
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); p=d['pipeline']; progs=p.pop('programs'); print('roles', json.dumps({f['name']: f['roles'] for f in d['functions'] if 'roles' in f}, sort_keys=True)); print('pipeline', json.dumps(p, sort_keys=True)); [print('rank', r, json.dumps(a[:3], sort_keys=True)) for r, a in enumerate(progs)]" %t.pipe.json | FileCheck %s --check-prefix=PIPE

// Tests that a pipelined module's manifest names every function by role:
// each function's links (par.grad, par.step, par.update) as its "roles",
// the pipeline's train step and stage table, and each rank's program as
// {op, mb, stage, peer} objects (peer for transfers only).
// PIPE:      roles {"loss": {"grad": "loss_grad", "step": "loss_step"}, "loss_s0": {"grad": "loss_s0_grad", "update": "loss_s0_update"}, "loss_s1": {"grad": "loss_s1_grad", "update": "loss_s1_update"}, "loss_step": {"grad": "loss_grad"}}
// PIPE-NEXT: pipeline {"axis": "pp", "backward": "full", "func": "loss", "m": 2, "p": 2, "schedule": "1f1b", "stages": [{"backward": "loss_s0_grad", "forward": "loss_s0_fwd", "update": "loss_s0_update"}, {"backward": "loss_s1_grad", "forward": "loss_s1_fwd", "update": "loss_s1_update"}], "step": "loss_step", "v": 1}
// PIPE-NEXT: rank 0 [{"mb": 0, "op": "fwd", "stage": 0}, {"mb": 0, "op": "send_act", "peer": 1, "stage": 1}, {"mb": 1, "op": "fwd", "stage": 0}]
// PIPE-NEXT: rank 1 [{"mb": 0, "op": "recv_act", "peer": 0, "stage": 1}, {"mb": 0, "op": "fwd", "stage": 1}, {"mb": 1, "op": "recv_act", "peer": 0, "stage": 1}]

// Tests the manifest of a partitioned function: mesh axes and, per tensor,
// dtype, global and local shapes, sharding and the initialiser in the
// schema's spelling ("uniform:<scale>" with the shortest decimal). Private
// functions are not entry points. The manifest carries its schema version
// (par/Manifest/Schema.h's kVersion), which par-run checks.
// CHECK:      {
// CHECK-NEXT:   "functions": [
// CHECK:          "inputs": [
// CHECK:              "dtype": "f32",
// CHECK-NEXT:         "global_shape": [
// CHECK-NEXT:           8,
// CHECK-NEXT:           16
// CHECK-NEXT:         ],
// CHECK-NEXT:         "local_shape": [
// CHECK-NEXT:           4,
// CHECK-NEXT:           16
// CHECK-NEXT:         ],
// CHECK-NEXT:         "sharding": {
// CHECK-NEXT:           "dims": [
// CHECK-NEXT:             [
// CHECK-NEXT:               "dp"
// CHECK-NEXT:             ],
// CHECK-NEXT:             []
// CHECK-NEXT:           ],
// CHECK-NEXT:           "partial": [],
// CHECK-NEXT:           "partial_kind": "sum"
// CHECK:              "init": "uniform:0.02",
// CHECK:              "init": "ones",
// CHECK:          "mesh": {
// CHECK-NEXT:       "axes": [
// CHECK-NEXT:         {
// CHECK-NEXT:           "name": "dp",
// CHECK-NEXT:           "size": 2
// CHECK:            "name": "mesh"
// CHECK:          "name": "f",
// CHECK:          "outputs": [
// CHECK-NOT:      "helper"
// CHECK:        "version": 2
// CHECK-NEXT: }
par.mesh @mesh ["dp"=2]
func.func @f(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
             %w: tensor<16xf32> {par.init = #par.init<uniform, 0.02>},
             %g: tensor<16xf32> {par.init = #par.init<ones>}) -> tensor<8x16xf32> {
  %e = func.call @helper(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}
func.func private @helper(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = math.exp %x : tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}
