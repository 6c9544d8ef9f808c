//===- ManifestTest.cpp - The manifest from the exporter to the tooling ---===//
//
// Target/Manifest (par-export-manifest) and the session's reader
// (lib/Runtime/session, par_session.h) and lib/Tooling's Function share
// par/Manifest/Schema.h; these tests write a manifest from IR and read it back
// through both: gradient compression (par.compression -> "compression" ->
// par_function_info_t.compression_* -> Function::compression) and
// error-feedback inputs (par.error_feedback -> "role": "error_feedback"),
// the exporter's diagnostics, and the reader's on hand-written manifests,
// including one without those keys (an older manifest reads as before).
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Target/Manifest/Passes.h"
#include "par/Tooling/Function.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

using namespace mlir;

namespace {

/// A train step as par-compress-gradients leaves it: the error-feedback
/// buffer (one row per device of dp=2) last among the arguments and fed
/// back by the last result, the compression on the function.
const char *kStep = R"mlir(
par.mesh @mesh ["dp"=2]
func.func @step(%w: tensor<4xf32> {par.init = #par.init<ones>},
                %x: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %e: tensor<2x4xf32> {par.error_feedback, par.init = #par.init<zeros>,
                                     par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<f32>, tensor<4xf32>,
        tensor<2x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
    attributes {par.feedback = array<i64: 1, 0, 2, 2>,
                par.compression = {method = "int8", compressed_bytes = 12.5 : f64,
                                   uncompressed_bytes = 48.0 : f64}} {
  %l = tensor.empty() : tensor<f32>
  return %l, %w, %e : tensor<f32>, tensor<4xf32>, tensor<2x4xf32>
}
)mlir";

class ManifestTest : public ::testing::Test {
protected:
  ManifestTest() {
    context.loadDialect<mlir::par::ParDialect, func::FuncDialect,
                        tensor::TensorDialect>();
    llvm::SmallString<128> path;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("par-manifest", path));
    dir = path.str().str();
  }
  ~ManifestTest() override { llvm::sys::fs::remove_directories(dir); }

  /// Exports `source`'s manifest to dir/sharded.json; the diagnostics go
  /// to `diagnostics`.
  LogicalResult exportManifest(const std::string &source) {
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return success();
    });
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, &context);
    if (!module)
      return failure();
    PassManager pm(&context);
    mlir::par::ExportManifestOptions options;
    options.outputFile = dir + "/sharded.json";
    pm.addPass(mlir::par::createExportManifest(options));
    return pm.run(*module);
  }

  void writeManifest(const std::string &json) {
    std::ofstream(dir + "/sharded.json") << json;
  }

  /// Reads dir/sharded.json (no code) and looks up `name`; on failure
  /// returns null with the session's message in `error`.
  par_function_t *lookup(const std::string &name, std::string &error) {
    par_session_options_t options;
    par_session_options_initialize(&options);
    options.load_code = 0;
    if (par_session_create(dir.c_str(), &options, &session) != PAR_OK) {
      error = par_session_last_error(nullptr);
      return nullptr;
    }
    par_function_t *fn = nullptr;
    if (par_session_lookup_function(session, name.c_str(), &fn) != PAR_OK)
      error = par_session_last_error(session);
    return fn;
  }

  void TearDown() override { par_session_destroy(session); }

  MLIRContext context;
  std::string dir, diagnostics;
  par_session_t *session = nullptr;
};

/// A hand-written manifest of one function `f` on dp=2 with input 0 of
/// `inputExtra` JSON members and the function of `functionExtra` ones.
std::string manifestWith(const std::string &inputExtra,
                         const std::string &functionExtra) {
  return R"({"version": 2, "functions": [{"name": "f",
    "mesh": {"name": "mesh", "axes": [{"name": "dp", "size": 2}]},
    "inputs": [{"dtype": "f32", "global_shape": [2, 4], "local_shape": [1, 4],
                "sharding": {"dims": [["dp"], []], "partial": [],
                             "partial_kind": "sum"})" +
         inputExtra + R"(}],
    "outputs": [{"dtype": "f32", "global_shape": [], "local_shape": [],
                 "sharding": {"dims": [], "partial": [], "partial_kind": "sum"}}])" +
         functionExtra + "}]}";
}

TEST_F(ManifestTest, CompressionAndErrorFeedbackRoundTrip) {
  ASSERT_TRUE(succeeded(exportManifest(kStep))) << diagnostics;
  std::string error;
  par_function_t *fn = lookup("step", error);
  ASSERT_NE(fn, nullptr) << error;

  par_function_info_t info;
  par_function_info(fn, &info);
  ASSERT_NE(info.compression_method, nullptr);
  EXPECT_STREQ(info.compression_method, "int8");
  EXPECT_DOUBLE_EQ(info.compressed_bytes, 12.5);
  EXPECT_DOUBLE_EQ(info.uncompressed_bytes, 48.0);
  ASSERT_EQ(info.num_inputs, 3);
  const char *roles[] = {"", "", "error_feedback"};
  for (int64_t i = 0; i < info.num_inputs; ++i) {
    par_tensor_info_t t;
    ASSERT_EQ(par_function_tensor(fn, PAR_INPUT, i, &t), PAR_OK);
    EXPECT_STREQ(t.role, roles[i]) << "arg" << i;
  }
  par_tensor_info_t e;
  ASSERT_EQ(par_function_tensor(fn, PAR_INPUT, 2, &e), PAR_OK);
  EXPECT_STREQ(e.init, "zeros");
  ASSERT_EQ(e.rank, 2);
  EXPECT_EQ(e.global_shape[0], 2);
  EXPECT_EQ(e.dim_axis_counts[0], 1);

  // The tooling's view of the same function.
  ::par::tooling::Session s(dir, PAR_PROGRAM_SHARDED, nullptr,
                          /*loadCode=*/false);
  ::par::tooling::Function f = s.lookup("step");
  ASSERT_TRUE(f.compression.has_value());
  EXPECT_EQ(f.compression->method, "int8");
  EXPECT_DOUBLE_EQ(f.compression->compressedBytes, 12.5);
  EXPECT_DOUBLE_EQ(f.compression->uncompressedBytes, 48.0);
  EXPECT_EQ(f.errorFeedbackInputs(), std::vector<size_t>{2});
  EXPECT_TRUE(f.inputs[2].errorFeedback());
  EXPECT_FALSE(f.inputs[0].errorFeedback());
  ASSERT_EQ(f.feedback.size(), 2u);
  EXPECT_EQ(f.feedback[1], (std::pair<size_t, size_t>{2, 2}));
}

TEST_F(ManifestTest, WithoutCompressionNothingChanges) {
  std::string source = kStep;
  size_t at = source.find(",\n                par.compression");
  size_t end = source.find("} {\n", at);
  source.erase(at, end - at);
  size_t ef = source.find("par.error_feedback, ");
  source.erase(ef, std::string("par.error_feedback, ").size());
  ASSERT_TRUE(succeeded(exportManifest(source))) << diagnostics;
  std::ifstream in(dir + "/sharded.json");
  std::string json((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  EXPECT_EQ(json.find("compression"), std::string::npos) << json;
  EXPECT_EQ(json.find("role"), std::string::npos) << json;
  std::string error;
  par_function_t *fn = lookup("step", error);
  ASSERT_NE(fn, nullptr) << error;
  par_function_info_t info;
  par_function_info(fn, &info);
  EXPECT_EQ(info.compression_method, nullptr);
  EXPECT_EQ(info.compressed_bytes, 0.0);
  EXPECT_EQ(info.uncompressed_bytes, 0.0);
}

TEST_F(ManifestTest, ExporterRefusesNegativeBytes) {
  std::string source = kStep;
  size_t at = source.find("compressed_bytes = 12.5");
  source.replace(at, std::string("compressed_bytes = 12.5").size(),
                 "compressed_bytes = -1.0");
  EXPECT_TRUE(failed(exportManifest(source)));
  EXPECT_NE(diagnostics.find("has a malformed 'par.compression'"),
            std::string::npos)
      << diagnostics;
}

TEST_F(ManifestTest, ExporterRefusesTwoRoles) {
  // (par.loss_scale is on a scalar f32 only.)
  std::string scalar = R"mlir(
par.mesh @mesh ["dp"=2]
func.func @f(%s: tensor<f32> {par.error_feedback,
                              par.loss_scale = #par.loss_scale<kind = static, init = 8.0, growth = 2.0, backoff = 0.5, interval = 10, hysteresis = 1, min = 1.0>})
    -> tensor<f32> {
  return %s : tensor<f32>
}
)mlir";
  EXPECT_TRUE(failed(exportManifest(scalar)));
  EXPECT_NE(diagnostics.find("is both the loss scale"), std::string::npos)
      << diagnostics;
}

TEST_F(ManifestTest, ReaderTakesOldManifests) {
  writeManifest(manifestWith("", ""));
  std::string error;
  par_function_t *fn = lookup("f", error);
  ASSERT_NE(fn, nullptr) << error;
  par_function_info_t info;
  par_function_info(fn, &info);
  EXPECT_EQ(info.compression_method, nullptr);
  par_tensor_info_t t;
  ASSERT_EQ(par_function_tensor(fn, PAR_INPUT, 0, &t), PAR_OK);
  EXPECT_STREQ(t.role, "");
}

TEST_F(ManifestTest, ReaderTakesHandWrittenCompression) {
  writeManifest(manifestWith(R"(, "role": "error_feedback")",
                             R"(, "compression": {"method": "topk",
                                 "compressed_bytes": 7, "uncompressed_bytes": 70.25})"));
  std::string error;
  par_function_t *fn = lookup("f", error);
  ASSERT_NE(fn, nullptr) << error;
  par_function_info_t info;
  par_function_info(fn, &info);
  ASSERT_NE(info.compression_method, nullptr);
  EXPECT_STREQ(info.compression_method, "topk");
  EXPECT_DOUBLE_EQ(info.compressed_bytes, 7);
  EXPECT_DOUBLE_EQ(info.uncompressed_bytes, 70.25);
  par_tensor_info_t t;
  ASSERT_EQ(par_function_tensor(fn, PAR_INPUT, 0, &t), PAR_OK);
  EXPECT_STREQ(t.role, "error_feedback");
}

TEST_F(ManifestTest, ReaderRefusesUnknownRole) {
  writeManifest(manifestWith(R"(, "role": "momentum")", ""));
  std::string error;
  EXPECT_EQ(lookup("f", error), nullptr);
  EXPECT_NE(error.find("arg0 has an unknown role 'momentum' (expected "
                       "'loss_scale', 'error_feedback' or "
                       "'compression_step')"),
            std::string::npos)
      << error;
}

TEST_F(ManifestTest, ReaderRefusesMalformedCompression) {
  for (const char *bad :
       {R"(, "compression": {"method": "int8", "compressed_bytes": 1})",
        R"(, "compression": {"compressed_bytes": 1, "uncompressed_bytes": 2})",
        R"(, "compression": {"method": "int8", "compressed_bytes": -1,
                             "uncompressed_bytes": 2})",
        R"(, "compression": "int8")"}) {
    writeManifest(manifestWith("", bad));
    std::string error;
    EXPECT_EQ(lookup("f", error), nullptr) << bad;
    EXPECT_NE(error.find("bad compression in 'f'"), std::string::npos)
        << bad << ": " << error;
    par_session_destroy(session);
    session = nullptr;
  }
}

} // namespace
