// A model's weights, declared once by the model file against a checkpoint: each call names a
// weight and the shape the config implies, and returns the handle the forward pass uses (as
// llama.cpp's create_tensor does). The first weight that is missing, has another shape or a
// non-float dtype is kept as status(); later declarations return empty handles, and the model's
// factory returns that status.
//
// Two modes run the same declarations:
//   kCheck    names, shapes and dtypes only; nothing is read or copied (LoadModelFolder, so a bad
//             folder fails at start-up naming the tensor).
//   kPrepare  weights read and made ready for the device: f32 on the CPU (F32 tensors in place
//             from the memory map, F16 / BF16 widened once), Linear layers packed for its GEMM,
//             fused layers (q, k, v -> qkv) concatenated first.
//
// Names follow transformers' and are written without the base model's module prefix ("bert.",
// "roberta.", "model."): a checkpoint may carry it or not, decided once from the first weight
// declared, so a half-prefixed checkpoint is reported rather than silently mixed. Head weights
// (classifier, lm_head) sit outside the base model and are declared with Scope::kHead.
//
// The loader owns every buffer it made: it must outlive the model and every handle; the store's
// maps must outlive it. Not thread-safe; used by one thread at load.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/strings.h"
#include "engine/base/allocator.h"
#include "engine/base/tensor.h"
#include "engine/loader/safetensors.h"
#include "engine/ops/linear.h"

namespace quiver::engine {

class WeightLoader {
 public:
  enum class Mode { kCheck, kPrepare };
  enum class Scope {
    kBase,  // inside the base model: the module prefix applies
    kHead,  // a task head beside it (classifier.*, lm_head.*): never prefixed
  };

  // `architecture` names the model in messages; `module_prefix` is the base model's ("bert.").
  WeightLoader(const WeightStore& store, std::string architecture, std::string module_prefix,
               Mode mode, Device device = Device::kCpu);

  Mode mode() const { return mode_; }
  Device device() const { return device_; }
  // The base model's Linear layers from here on (`--quantize int8`); task heads (Scope::kHead:
  // classifiers, SPLADE's vocabulary projection) stay f32.
  void set_precision(ops::WeightPrecision precision) { precision_ = precision; }

  // A weight read as a plain tensor (embedding tables, norms): f32 on the device.
  Tensor Get(const std::string& name, std::initializer_list<int64_t> shape,
             Scope scope = Scope::kBase);
  // "name.weight" [out, in] and, with `bias`, "name.bias" [out] (or `bias_name` [out] where
  // given, a head's name read as Scope::kHead names are: a bias stored apart from its weight, as
  // BertForMaskedLM's "cls.predictions.bias"), prepared for the device together: a bias set on
  // the result afterwards would miss the device's own copy of it (a CUDA Linear's bf16 bias).
  // `task_head`: a head whose weights sit among the base model's names (BERT's pooler, a decoder
  // tied to the word embeddings): kept f32 as Scope::kHead layers are.
  ops::LinearWeights Linear(const std::string& name, int64_t out, int64_t in, bool bias,
                            Scope scope = Scope::kBase, bool task_head = false,
                            const std::string& bias_name = {});
  // Several Linear layers over one input as one: their weights (and biases) stacked by rows in
  // the order given, `outs[i]` rows for names[i].
  ops::LinearWeights FusedLinear(const std::vector<std::string>& names,
                                 const std::vector<int64_t>& outs, int64_t in, bool bias);

  // A table computed at load from a weight of `shape` (a relative position bias expanded per
  // distance): `make` maps the weight's f32 values to the table's, of `table_shape`; the result
  // is f32 on the device (empty in kCheck mode).
  template <typename Make>
  Tensor Derived(const std::string& name, std::initializer_list<int64_t> shape,
                 std::initializer_list<int64_t> table_shape, Make make,
                 Scope scope = Scope::kBase) {
    const TensorInfo* info = Find(name, shape, scope);
    if (info == nullptr || mode_ == Mode::kCheck) return {};
    std::vector<float> scratch;
    const std::vector<float> table = make(F32(*info, scratch));
    int64_t numel = 1;
    for (int64_t d : table_shape) numel *= d;
    if (static_cast<int64_t>(table.size()) != numel) {
      if (status_.ok()) {
        status_ = absl::InternalError(
            StrCat("the table made from '", name, "' has ", table.size(), " values, not ", numel));
      }
      return {};
    }
    return Own(table.data(), table_shape);
  }

  // A tensor of `value`s on the device that no checkpoint holds (the zero beta of a LayerNorm
  // without bias); empty in kCheck mode.
  Tensor Constant(std::initializer_list<int64_t> shape, float value) {
    if (mode_ == Mode::kCheck) return {};
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const std::vector<float> values(static_cast<size_t>(numel), value);
    return Own(values.data(), shape);
  }

  // Whether the checkpoint holds `name` (with the module prefix as decided, for kBase).
  bool Has(const std::string& name, Scope scope = Scope::kBase) const {
    if (scope == Scope::kHead || prefixed_ == 0) return store_.Find(name) != nullptr;
    if (prefixed_ == 1) return store_.Find(prefix_ + name) != nullptr;
    return store_.Find(name) != nullptr || store_.Find(prefix_ + name) != nullptr;
  }

  // OK, or the first declaration that failed (naming the tensor and both shapes).
  const absl::Status& status() const { return status_; }
  // The declared weights found so far, as the checkpoint names them, in declaration order.
  const std::vector<std::string>& names() const { return names_; }

 private:
  const TensorInfo* Find(const std::string& name, const std::vector<int64_t>& shape, Scope scope);
  // The f32 values of `info`: a view of the map when it already is aligned f32, else a widened
  // copy into `scratch`.
  const float* F32(const TensorInfo& info, std::vector<float>& scratch) const;
  // A device tensor holding `values` (CPU: a view of them when `values` outlives the loader).
  Tensor Own(const float* values, std::initializer_list<int64_t> shape);

  const WeightStore& store_;
  std::string architecture_, prefix_;
  Mode mode_;
  Device device_;
  ops::WeightPrecision precision_ = ops::WeightPrecision::kF32;
  Allocator* allocator_ = nullptr;
  int prefixed_ = -1;  // -1: not decided yet; then 0 or 1
  absl::Status status_;
  std::vector<std::string> names_;
  std::vector<Buffer> owned_;
};

}  // namespace quiver::engine
