//===- Passes.td - Target/Manifest passes -------------------------*- tablegen -*-===//

#ifndef PAR_TARGET_MANIFEST_PASSES_TD
#define PAR_TARGET_MANIFEST_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExportManifest : Pass<"par-export-manifest", "ModuleOp"> {
  let summary = "Writes the entry points' interface as JSON";
  let description = [{
    For every public function with a body: its name, mesh (axes and sizes;
    none for an unsharded program) and, per argument and result, the element
    type, global and local shapes and sharding (per-dimension axes, partial
    axes and kind). A runtime driver (par-run) reads it to initialise,
    scatter and gather tensors. Run after partitioning.

    ```json
    {"functions": [{"name": "mlp", "mesh": {"name": "mesh", "axes": [{"name": "tp", "size": 4} ]},
      "inputs": [{"dtype": "f32", "global_shape": [8, 16], "local_shape": [8, 16],
                  "sharding": {"dims": [[], []], "partial": [], "partial_kind": "sum"}} ], ...} ]}
    ```
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the manifest ('-' for stdout)">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "What the program's code runs on: 'cpu' or 'cuda:<chip>' (the "
           "manifest's top-level \"target\"; a cuda program's entry points "
           "take their outputs as trailing out-parameters in device memory)">
  ];
}

#endif // PAR_TARGET_MANIFEST_PASSES_TD
