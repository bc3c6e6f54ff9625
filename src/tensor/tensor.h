// File: tensor.h
// Tensor: a cheap handle to a shape-only tensor. It carries sizes, strides, dtype, a shared Storage
// and the autograd metadata PyTorch keeps on a tensor (its grad_fn, or for a leaf its accumulator and
// .grad). Handles are reference counted like PyTorch's TensorImpl, so a storage dies exactly when
// its last tensor does: a temporary at the end of its expression, a local when its scope ends, a
// saved tensor when its node has run.
//
// Not for: data. A census never computes values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensor/dims.h"
#include "tensor/dtype.h"
#include "tensor/ref.h"
#include "tensor/storage.h"

namespace census {

class Node;
// Node is only declared here: graph/node.cpp counts its handles.
void ref_retain(Node* node);
void ref_release(Node* node);
long ref_count(const Node* node);

struct TensorImpl final : RefCounted {
  // User-provided, so that making one does not zero the whole object first (value-initialization
  // would): the member initializers below are all it needs.
  TensorImpl() {}  // NOLINT(modernize-use-equals-default)

  Dims sizes;
  Dims strides;
  DType dtype = DType::kBFloat16;
  Ref<Storage> storage;
  // Where the view starts in its storage, in elements of `dtype` (PyTorch's storage_offset()): a slice,
  // a select or a split past the first part starts further in.
  int64_t storage_offset = 0;

  // Autograd metadata. A leaf that requires grad has `requires_grad` set and, once an op uses it,
  // an AccumulateGrad node; a non-leaf has a grad_fn and the index of the output it is.
  bool requires_grad = false;
  Ref<Node> grad_fn;
  uint32_t output_nr = 0;
  // Weak: the leaf's AccumulateGrad while one lives (it clears this as it dies), made on first use.
  Node* grad_accumulator = nullptr;
  Ref<TensorImpl> grad;  // .grad of a leaf
  std::string name;                  // a parameter's path in its layer, e.g. "self_attn.q_proj.weight"
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Ref<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Dims& sizes() const { return impl_->sizes; }
  const Dims& strides() const { return impl_->strides; }
  int dim() const { return impl_->sizes.size(); }
  int64_t size(int64_t d) const { return impl_->sizes[wrap_dim(d, dim())]; }
  int64_t stride(int64_t d) const { return impl_->strides[wrap_dim(d, dim())]; }
  DType dtype() const { return impl_->dtype; }
  int64_t numel() const { return impl_->sizes.product(); }
  int64_t element_size() const { return census::element_size(impl_->dtype); }
  // Bytes of this tensor's elements (a view's, not its storage's).
  int64_t nbytes() const { return numel() * element_size(); }
  const Ref<Storage>& storage() const { return impl_->storage; }
  int64_t storage_offset() const { return impl_->storage_offset; }
  int64_t storage_id() const { return impl_->storage->id; }
  bool is_parameter() const { return impl_->storage->is_parameter; }

  bool requires_grad() const { return impl_->requires_grad || impl_->grad_fn != nullptr; }
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const Ref<Node>& grad_fn() const { return impl_->grad_fn; }
  uint32_t output_nr() const { return impl_->output_nr; }
  Tensor grad() const { return Tensor(impl_->grad); }
  const std::string& name() const { return impl_->name; }

  bool is_contiguous() const;
  // True when the elements cover their span exactly once, in some order (PyTorch's
  // is_non_overlapping_and_dense): an expanded tensor is not.
  bool is_non_overlapping_and_dense() const;

  TensorImpl* impl() const { return impl_.get(); }
  const Ref<TensorImpl>& impl_ptr() const { return impl_; }
  long use_count() const { return impl_.use_count(); }

  // A new handle on the same storage with no autograd history, as PyTorch's detach().
  Tensor detach() const;

  std::string describe() const;  // "bfloat16[1, 128, 256]"

 private:
  Ref<TensorImpl> impl_;
};

}  // namespace census
