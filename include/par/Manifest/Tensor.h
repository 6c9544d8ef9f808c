//===- Tensor.h - The one description of a function's tensor ----*- C++ -*-===//
//
// What the manifest says about one input or output of a compiled function:
// element type, global and local shapes, the mesh axes splitting each
// dimension and those holding partial values, the initialiser, the role,
// and the frontend's names, slice and vocabulary. The session reads it from
// the manifest (Manifest.h) and hands it out through the C API
// (par_tensor_info_t, a view of it); the tooling converts that view back
// into this struct (tooling::Tensor is this one). Keys and values are
// spelled by Schema.h, which par-export-manifest writes by.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_MANIFEST_TENSOR_H
#define PAR_MANIFEST_TENSOR_H

#include "par/Runtime/par_types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace par::manifest {

struct Tensor {
  par_dtype_t dtype = PAR_F32;
  /// The element type's entry in the runtime's table (par_dtype_info):
  /// its name, bytes and whether it is a floating-point type (setDtype).
  std::string dtypeName = "f32";
  int64_t elementSize = 4;
  bool isFloat = true;
  std::vector<int64_t> global, local;
  std::vector<std::vector<int64_t>> dims; // mesh axes splitting each dim
  std::vector<int64_t> partial;           // mesh axes holding partial values
  par_reduction_t partialKind = PAR_SUM;
  std::string init; // "", "zeros", "ones" or "uniform:<scale>"
  std::string role; // "", "loss_scale", "error_feedback",
                    // "compression_step", "tokens" or "targets"
  /// The frontend's PyTorch name ("" without: par.name), a tied
  /// parameter's other names (par.aliases) and a tokens/targets input's
  /// vocabulary (values in [0, vocab); 0: none).
  std::string name;
  std::vector<std::string> aliases;
  /// A segment of a fused parameter (par.slice): the fused tensor's name
  /// ("" if none), the dimension and offset of the slice in it, and the
  /// fused tensor's size in that dimension when the slice reaches past it
  /// (0: it does not): the rest is padding (a vocabulary padded to a
  /// multiple of tp), zero on load and dropped on save.
  std::string sliceOf;
  int64_t sliceDim = 0, sliceOffset = 0, sliceExtent = 0;
  int64_t vocab = 0;
  int64_t globalCount = 1, localCount = 1; // elements

  /// Sets the element type and its table entry.
  void setDtype(par_dtype_t d);
  /// The mesh axes splitting dimension `d`, major first.
  const std::vector<int64_t> &axesOfDim(size_t d) const { return dims[d]; }
  /// Whether the tensor splits or is partial over mesh axis `a`.
  bool usesAxis(int64_t a) const;
  /// An error-feedback buffer of gradient compression (role
  /// "error_feedback"): train state the unsharded reference does not have.
  bool errorFeedback() const;
  /// An error-feedback buffer or the compression's warm-up step counter:
  /// state of the sharded program that its reference does not have.
  bool compressionState() const;

  int64_t localBytes() const { return localCount * elementSize; }
  int64_t globalBytes() const { return globalCount * elementSize; }
  /// Same element type, local shape and sharding.
  bool sameLayout(const Tensor &o) const;
  /// No dimension split and no partial axis.
  bool replicated() const;
};

} // namespace par::manifest

#endif // PAR_MANIFEST_TENSOR_H
