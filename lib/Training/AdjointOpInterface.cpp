//===- AdjointOpInterface.cpp - Per-op reverse-mode adjoints --------------===//
//
// The interface's generated definitions and AdjointState's anchor.
//
//===----------------------------------------------------------------------===//

#include "par/Training/AdjointOpInterface.h"

using namespace mlir;
using namespace mlir::par;

#include "par/Training/AdjointOpInterface.cpp.inc"

AdjointState::~AdjointState() = default;
