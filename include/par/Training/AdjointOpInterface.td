//===- AdjointOpInterface.td - reverse-mode adjoints ----*- tablegen -*-===//

#ifndef PAR_TRAINING_ADJOINTOPINTERFACE_TD
#define PAR_TRAINING_ADJOINTOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def Par_AdjointOpInterface : OpInterface<"AdjointOpInterface"> {
  let cppNamespace = "::mlir::par";
  let description = [{
    Gives an op its reverse-mode adjoint for par-autodiff: from the adjoints
    of its results, builds the adjoints of its active operands (and of active
    values its regions read from above) and accumulates them into the
    reverse sweep. The sweep is seen only through `AdjointState`, so a new
    op's derivative is a model of this interface and the autodiff driver does
    not change. Upstream ops get it as external models (AdjointModels.cpp);
    an op whose results carry no gradient (a fill, a constant) has a model
    that builds nothing. An op without the interface cannot be
    differentiated.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Builds the op's adjoint at the state's insertion point: for
                 every active operand, reads the adjoints of the results
                 (`state.getAdjoint`, null for a result no use of which
                 reaches the loss) and calls `state.accumulate`. Called only
                 when some active result has an adjoint. Returns failure
                 after emitting a diagnostic on the op if it cannot be
                 differentiated.}],
      /*retTy=*/"::mlir::LogicalResult",
      /*methodName=*/"buildAdjoint",
      /*args=*/(ins "::mlir::par::AdjointState &":$state)>
  ];
}

#endif // PAR_TRAINING_ADJOINTOPINTERFACE_TD
