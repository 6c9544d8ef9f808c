// Tests the pipeline passes' errors: a schedule needs the split first, a
// pipeline axis, stages = axis size x virtual, a train step accumulating as
// many micro-batches, a known schedule the split can run (ZB-H1 needs a
// split backward), and m divisible by p for interleaved. #par.pipeline's
// verifier, the proof par-verify-pipeline runs, rejects hand-edited
// programs that would hang, naming both ranks.
// RUN: not par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=NOSPLIT
// NOSPLIT: error: par-pipeline-schedule: the module has no pipeline stages (run par-pipeline-split first)
// RUN: not par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 "--par-pipeline-schedule=axis=stage" 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: error: par-pipeline-schedule: no mesh has an axis named 'stage'
// RUN: not par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=3 --par-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=COUNT
// COUNT: error: par-pipeline-schedule: 3 stages cannot be placed on the 'pp' axis of size 2 with 1 stage(s) per rank (stages must be 2)
// RUN: not par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 --par-autodiff "--par-optimizer=micro-batches=2" "--par-pipeline-schedule=micro-batches=4" 2>&1 | FileCheck %s --check-prefix=MB
// MB: error: 'func.func' op accumulates 2 micro-batch(es) but the pipeline schedule has 4 (give par-optimizer micro-batches=4)
// RUN: not par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 "--par-pipeline-schedule=schedule=zbh1" 2>&1 | FileCheck %s --check-prefix=ZB
// ZB: error: par-pipeline-schedule: zbh1 runs the input and weight halves of each backward apart: split with par-pipeline-split=split-backward=true
// RUN: not par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 "--par-pipeline-schedule=schedule=zb" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: par-pipeline-schedule: unknown schedule 'zb' (expected gpipe, 1f1b, interleaved, zbh1 or zbv)
// RUN: not par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=4 "--par-pipeline-schedule=schedule=interleaved virtual=2 micro-batches=3" 2>&1 | FileCheck %s --check-prefix=INTER
// INTER: error: par-pipeline-schedule: interleaved needs m divisible by p (m=3, p=2)
// RUN: not par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 "--par-pipeline-schedule=micro-batches=-1" 2>&1 | FileCheck %s --check-prefix=M0
// M0: error: par-pipeline-schedule: micro-batches must be >= 1 (or 0: the train step's) and virtual >= 1
// RUN: not par-opt %s --par-verify-pipeline 2>&1 | FileCheck %s --check-prefix=HANG
// HANG: error: the pipeline programs are invalid: deadlock: rank 0 waits in send-act(mb=1,s=1) to rank 1, but rank 1 is blocked in send-grad(mb=0,s=1) to rank 0
// RUN: not par-opt %S/Inputs/pipeline-mlp.mlir --par-verify-pipeline 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: error: no pipeline programs in the module (run par-pipeline-split and par-pipeline-schedule)

// 1F1B, p=2 m=3, hand-edited into the classic hang (Megatron #5100): rank 1
// receives each activation just before its forward and sends each gradient
// just after its backward, so under blocking send/recv rank 0 waits to send
// act(mb=1) while rank 1 waits to send grad(mb=0).
module attributes {par.pipeline = #par.pipeline<func = @loss,
    stages = [#par.stage<forward = @loss, loss = @loss>, #par.stage<forward = @loss, loss = @loss>],
    schedule = "1f1b", axis = "pp", micro_batches = 3, programs = [
    #par.program<[fwd(mb=0, s=0), send_act(mb=0, s=1, to=1), fwd(mb=1, s=0), send_act(mb=1, s=1, to=1),
                  recv_grad(mb=0, s=1, from=1), bwd(mb=0, s=0), fwd(mb=2, s=0), send_act(mb=2, s=1, to=1),
                  recv_grad(mb=1, s=1, from=1), bwd(mb=1, s=0), recv_grad(mb=2, s=1, from=1), bwd(mb=2, s=0)]>,
    #par.program<[recv_act(mb=0, s=1, from=0), fwd(mb=0, s=1), bwd(mb=0, s=1), send_grad(mb=0, s=1, to=0),
                  recv_act(mb=1, s=1, from=0), fwd(mb=1, s=1), bwd(mb=1, s=1), send_grad(mb=1, s=1, to=0),
                  recv_act(mb=2, s=1, from=0), fwd(mb=2, s=1), bwd(mb=2, s=1), send_grad(mb=2, s=1, to=0)]>]>} {
  func.func @loss() { return }

}
