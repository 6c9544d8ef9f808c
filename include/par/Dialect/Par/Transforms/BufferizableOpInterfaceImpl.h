//===- BufferizableOpInterfaceImpl.h - Bufferizing par ops ------*- C++ -*-===//
//
// BufferizableOpInterface external models for par's collectives and
// point-to-point ops (one-shot-bufferize then handles them like upstream ops).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define PAR_DIALECT_PAR_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::par {

/// Registers the bufferization models of par's collectives.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
