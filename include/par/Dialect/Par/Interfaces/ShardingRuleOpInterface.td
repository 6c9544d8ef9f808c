//===- ShardingRuleOpInterface.td - op sharding rules ----*- tablegen -*-===//

#ifndef PAR_DIALECT_PAR_INTERFACES_SHARDINGRULEOPINTERFACE_TD
#define PAR_DIALECT_PAR_INTERFACES_SHARDINGRULEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def Par_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::par";
  let description = [{
    Gives an op's sharding rule: the op's loops ("factors") with their sizes
    and kinds, and for every tensor operand and result which factor each
    dimension iterates over. Propagation moves shardings between operands and
    results through shared factors; the partitioner shards the op's loops by
    the factors' axes. Upstream ops get this interface as external models
    (see ShardingRuleModels.cpp), so rules are data, not switches.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Returns the op's sharding rule, or failure (with no
                 diagnostic) if this instance has none, e.g. a linalg.generic
                 whose indexing maps are not projected permutations.}],
      /*retTy=*/"::mlir::FailureOr<::mlir::par::ShardingRule>",
      /*methodName=*/"getShardingRule",
      /*args=*/(ins)>
  ];
}

#endif // PAR_DIALECT_PAR_INTERFACES_SHARDINGRULEOPINTERFACE_TD
