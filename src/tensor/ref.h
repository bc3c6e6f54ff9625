// File: ref.h
// Ref<T>: the reference-counted handle a census's tensors, storages, graph nodes and saved-tensor hooks
// hold each other by. The count lives in the object (RefCounted): a census runs on one thread, makes
// its objects in an arena (tensor/arena.h) that gives their memory back all at once, and never needs
// a weak handle, so a handle is one pointer and releasing it is one decrement, with no control block
// and no weak count (std::shared_ptr's were a sixth of a census's instructions).
//
// When the last handle goes the object is destroyed at once, as PyTorch frees a tensor's storage
// when its last reference goes, and its memory goes back to its arena for the census's next object of
// that size (Note [Arena memory reused], tensor/arena.h).
//
// Not for: objects outside a census's arena, or shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace census {

// The base of every object a Ref holds. A class destroyed through a Ref to one of its bases must
// have a virtual destructor (Node, SavedTensorHooks); the others are final (TensorImpl, Storage).
class RefCounted {
 public:
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;

  void retain_ref() { ++refs_; }
  // True when that was the last handle.
  bool release_ref() { return --refs_ == 0; }
  uint32_t ref_count() const { return refs_; }

  // Which arena made the object and the size class of its memory (Note [Arena memory reused]); 0 for
  // an object no arena made. Set by arena_shared, read as the object is destroyed.
  uint32_t arena_tag() const { return arena_tag_; }
  void set_arena_tag(uint32_t tag) { arena_tag_ = tag; }

 protected:
  RefCounted() = default;
  ~RefCounted() = default;

 private:
  uint32_t refs_ = 0;
  uint32_t arena_tag_ = 0;
};

// Gives a destroyed object's memory back to the arena that made it, where that arena is the thread's
// current one (tensor/arena.cpp). `tag` is the object's arena_tag.
void give_back_to_arena(void* memory, uint32_t tag);

// The address an arena gave `object`: the whole object's, which a base's pointer may not be.
template <class T>
void* arena_memory_of(T* object) {
  if constexpr (std::is_polymorphic_v<T>) {
    return dynamic_cast<void*>(object);
  } else {
    return static_cast<void*>(object);
  }
}

// How a Ref holds and lets go of a T. A class that a header holds by Ref while only declaring it
// (Node, in tensor/tensor.h) declares its own three beside it, defined where it is complete.
template <class T>
void ref_retain(T* object) {
  object->RefCounted::retain_ref();
}
template <class T>
void ref_release(T* object) {
  static_assert(std::has_virtual_destructor_v<T> || std::is_final_v<T>,
                "a Ref to a base class needs a virtual destructor to destroy the object it holds");
  if (!object->RefCounted::release_ref()) return;
  const uint32_t tag = object->RefCounted::arena_tag();
  void* memory = arena_memory_of(object);
  object->~T();
  if (tag != 0) give_back_to_arena(memory, tag);
}
template <class T>
long ref_count(const T* object) {
  return static_cast<long>(object->RefCounted::ref_count());
}

template <class T>
class Ref {
 public:
  Ref() = default;
  Ref(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  // A new handle on `object` (one more reference to it).
  explicit Ref(T* object) : p_(object) { retain(); }
  Ref(const Ref& other) : p_(other.p_) { retain(); }
  Ref(Ref&& other) noexcept : p_(std::exchange(other.p_, nullptr)) {}
  template <class U>
    requires std::is_convertible_v<U*, T*>
  Ref(const Ref<U>& other) : p_(other.p_) {  // NOLINT(google-explicit-constructor)
    retain();
  }
  template <class U>
    requires std::is_convertible_v<U*, T*>
  Ref(Ref<U>&& other) noexcept : p_(std::exchange(other.p_, nullptr)) {}  // NOLINT(google-explicit-constructor)
  ~Ref() { release(p_); }

  // The old object is released after the new one is held, as std::shared_ptr does: its destructor
  // may reach this handle.
  Ref& operator=(const Ref& other) {
    T* old = p_;
    p_ = other.p_;
    retain();
    release(old);
    return *this;
  }
  Ref& operator=(Ref&& other) noexcept {
    if (this != &other) {
      T* old = p_;
      p_ = std::exchange(other.p_, nullptr);
      release(old);
    }
    return *this;
  }
  Ref& operator=(std::nullptr_t) {
    reset();
    return *this;
  }
  void reset() { release(std::exchange(p_, nullptr)); }

  T* get() const { return p_; }
  T& operator*() const { return *p_; }
  T* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }
  // The handles on the object (0 for none), as std::shared_ptr::use_count.
  long use_count() const { return p_ != nullptr ? ref_count(p_) : 0; }

  friend bool operator==(const Ref& a, std::nullptr_t) { return a.p_ == nullptr; }
  template <class U>
  friend bool operator==(const Ref& a, const Ref<U>& b) {
    return a.p_ == b.p_;
  }

 private:
  template <class U>
  friend class Ref;

  void retain() {
    if (p_ != nullptr) ref_retain(p_);
  }
  static void release(T* p) {
    if (p != nullptr) ref_release(p);
  }

  T* p_ = nullptr;
};

}  // namespace census
