// RUN: par-opt %s -split-input-file -verify-diagnostics

// Tests the frontend's attributes on function arguments (par.name,
// par.aliases, par.slice, par.data, par.vocab): each bad use is a diagnostic naming
// the argument.

// Tests that a well-formed set verifies (a tied parameter, tokens and
// targets).
func.func @ok(%w: tensor<4x2xf32> {par.param, par.name = "wte.weight", par.aliases = ["lm_head.weight"]},
              %t: tensor<2x3xi64> {par.data = "tokens", par.vocab = 4 : i64},
              %y: tensor<2x3xi64> {par.data = "targets", par.vocab = 4 : i64}) {
  return
}

// -----

// Tests that the segments of a fused parameter verify (par.slice).
func.func @slice_ok(%q: tensor<64x192xf32> {par.param, par.name = "attn.0.weight", par.slice = {of = "attn.weight", dim = 1 : i64, offset = 0 : i64}},
                    %k: tensor<64xf32> {par.param, par.name = "attn.1.bias", par.slice = {of = "attn.bias", dim = 0 : i64, offset = 64 : i64}}) {
  return
}

// -----

// Tests that a vocabulary table padded past its tensor verifies (par.slice
// with an extent: the file's 95 rows, then padding to 128).
func.func @slice_padded(%w: tensor<128x16xf32> {par.param, par.name = "wte.weight", par.slice = {of = "wte.weight", dim = 0 : i64, offset = 0 : i64, extent = 95 : i64}}) {
  return
}

// -----

// Tests that an extent lies past the offset (the tensor ends inside the
// argument).
// expected-error @+1 {{argument #0: 'par.slice' extent 4 must lie past the offset 4: the tensor ends there, inside the argument}}
func.func @slice_extent_before(%w: tensor<128x16xf32> {par.name = "wte.weight", par.slice = {of = "wte.weight", dim = 0 : i64, offset = 4 : i64, extent = 4 : i64}}) {
  return
}

// -----

// Tests that par.slice names the fused tensor.
// expected-error @+1 {{argument #0: 'par.slice' must be {of = "name", dim = i64, offset = i64[, extent = i64]}, got {dim = 0 : i64, offset = 0 : i64}}}
func.func @slice_no_of(%w: tensor<4xf32> {par.name = "w.0", par.slice = {dim = 0 : i64, offset = 0 : i64}}) {
  return
}

// -----

// Tests that par.slice needs a name on the same argument.
// expected-error @+1 {{argument #0: 'par.slice' needs a 'par.name' on the same argument}}
func.func @slice_without_name(%w: tensor<4xf32> {par.slice = {of = "w", dim = 0 : i64, offset = 0 : i64}}) {
  return
}

// -----

// Tests that par.slice's dimension is one of the argument's.
// expected-error @+1 {{argument #0: 'par.slice' dim 1 offset 0 does not fit the argument's type 'tensor<4xf32>'}}
func.func @slice_dim(%w: tensor<4xf32> {par.name = "w.0", par.slice = {of = "w", dim = 1 : i64, offset = 0 : i64}}) {
  return
}

// -----

// Tests that par.name is a string.
// expected-error @+1 {{argument #0: 'par.name' must be a non-empty string, got 3 : i64}}
func.func @name_kind(%w: tensor<4xf32> {par.name = 3 : i64}) {
  return
}

// -----

// Tests that par.name is not empty.
// expected-error @+1 {{argument #0: 'par.name' must be a non-empty string}}
func.func @name_empty(%w: tensor<4xf32> {par.name = ""}) {
  return
}

// -----

// Tests that two arguments cannot share a name.
// expected-error @+1 {{argument #0: the name 'fc.weight' is also given to argument #1}}
func.func @name_twice(%a: tensor<4xf32> {par.name = "fc.weight"},
                      %b: tensor<4xf32> {par.name = "fc.weight"}) {
  return
}

// -----

// Tests that an alias cannot be another argument's name.
// expected-error @+1 {{argument #0: the name 'a' is also given to argument #1}}
func.func @alias_clash(%a: tensor<4xf32> {par.name = "a"},
                       %b: tensor<4xf32> {par.name = "b", par.aliases = ["a"]}) {
  return
}

// -----

// Tests that aliases need a name on the same argument.
// expected-error @+1 {{argument #0: 'par.aliases' needs a 'par.name' on the same argument}}
func.func @alias_without_name(%a: tensor<4xf32> {par.aliases = ["x"]}) {
  return
}

// -----

// Tests that aliases are strings.
// expected-error @+1 {{argument #0: 'par.aliases' must hold non-empty strings, got 1 : i64}}
func.func @alias_kind(%a: tensor<4xf32> {par.name = "a", par.aliases = [1]}) {
  return
}

// -----

// Tests that an alias list does not repeat the argument's name.
// expected-error @+1 {{argument #0: 'par.aliases' repeats the name 'a'}}
func.func @alias_repeat(%a: tensor<4xf32> {par.name = "a", par.aliases = ["a"]}) {
  return
}

// -----

// Tests that par.aliases is an array.
// expected-error @+1 {{argument #0: 'par.aliases' must be an array of strings, got "x"}}
func.func @alias_not_array(%a: tensor<4xf32> {par.name = "a", par.aliases = "x"}) {
  return
}

// -----

// Tests that a data role is tokens or targets.
// expected-error @+1 {{argument #0: 'par.data' must be "tokens" or "targets", got "labels"}}
func.func @data_role(%t: tensor<4xi64> {par.data = "labels", par.vocab = 4 : i64}) {
  return
}

// -----

// Tests that a data role sits on an integer tensor.
// expected-error @+1 {{argument #0: 'par.data' = "tokens" needs an integer tensor, got 'tensor<4xf32>'}}
func.func @data_float(%t: tensor<4xf32> {par.data = "tokens", par.vocab = 4 : i64}) {
  return
}

// -----

// Tests that a data argument is not a parameter.
// expected-error @+1 {{argument #0: 'par.data' marks a data argument, which cannot also be a parameter ('par.param')}}
func.func @data_param(%t: tensor<4xi64> {par.param, par.data = "tokens", par.vocab = 4 : i64}) {
  return
}

// -----

// Tests that a data role comes with its vocabulary.
// expected-error @+1 {{argument #0: 'par.data' = "targets" needs 'par.vocab'}}
func.func @data_no_vocab(%t: tensor<4xi64> {par.data = "targets"}) {
  return
}

// -----

// Tests that the vocabulary is a positive i64.
// expected-error @+1 {{argument #0: 'par.vocab' must be a positive i64, got 0 : i64}}
func.func @vocab_zero(%t: tensor<4xi64> {par.data = "tokens", par.vocab = 0 : i64}) {
  return
}

// -----

// Tests that par.vocab is an i64, not another integer type.
// expected-error @+1 {{argument #0: 'par.vocab' must be a positive i64, got 4 : i32}}
func.func @vocab_i32(%t: tensor<4xi64> {par.data = "tokens", par.vocab = 4 : i32}) {
  return
}

// -----

// Tests that a vocabulary qualifies a data role.
// expected-error @+1 {{argument #0: 'par.vocab' needs 'par.data'}}
func.func @vocab_alone(%t: tensor<4xi64> {par.vocab = 4 : i64}) {
  return
}
