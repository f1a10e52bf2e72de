#include "pv_interface/model.hpp"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace pv {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::string_view to_string(writeback w) {
  switch (w) {
    case writeback::none: return "none";
    case writeback::all: return "all";
    case writeback::random: return "random";
  }
  return "?";
}

// ---- access_guard ------------------------------------------------------------------------

access_guard::access_guard(model* m, access a, const void* p, std::size_t n)
    : model_(m), access_(a), address_(p), size_(n) {
  model_->mutex_.lock();
}

access_guard::access_guard(access_guard&& other) noexcept
    : model_(other.model_), access_(other.access_), address_(other.address_),
      size_(other.size_) {
  other.model_ = nullptr;
}

access_guard::~access_guard() {
  if (model_ == nullptr) return;
  if (access_.kind == access_kind::store) {
    model_->stored(access_, address_, size_);
  } else {
    model_->loaded(access_, address_, size_);
  }
  model_->mutex_.unlock();
}

// ---- model -------------------------------------------------------------------------------

model::model(std::size_t bytes) {
  if (bytes == 0) throw std::invalid_argument("pv::model: region of 0 bytes");
  size_ = (bytes + cache_line - 1) / cache_line * cache_line;
  base_ = static_cast<std::byte*>(::operator new(size_, std::align_val_t{cache_line}));
  std::memset(base_, 0, size_);
  durable_ = std::make_unique<std::byte[]>(size_);
  std::memset(durable_.get(), 0, size_);
  lines_.resize(size_ / cache_line);
}

model::~model() {
  assert(active() != this && "a model destroyed while active");
  ::operator delete(base_, std::align_val_t{cache_line});
}

bool model::contains(const void* p, std::size_t n) const noexcept {
  auto a = reinterpret_cast<std::uintptr_t>(p);
  auto b = reinterpret_cast<std::uintptr_t>(base_);
  return a >= b && a - b <= size_ && n <= size_ - (a - b);
}

std::uint32_t model::thread_number() {
  auto [it, inserted] = thread_numbers_.try_emplace(
      std::this_thread::get_id(), static_cast<std::uint32_t>(thread_numbers_.size()));
  return it->second;
}

void model::record(const trace_event& e) {
  if (tracing_) trace_.push_back(e);
}

std::uint64_t model::next_event(event_kind kind) {
  std::uint64_t index = events_.fetch_add(1, std::memory_order_relaxed);
  event_hook hook;
  {
    std::lock_guard lock(mutex_);
    hook = hook_;
  }
  if (hook) hook(kind, index);
  return index;
}

void model::stored(access a, const void* p, std::size_t n) {
  auto offset = static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - base_);
  std::size_t first = offset / cache_line;
  std::size_t last = (offset + (n == 0 ? 1 : n) - 1) / cache_line;
  std::uint64_t version = 0;
  for (std::size_t l = first; l <= last; ++l) {
    line_state& line = lines_[l];
    auto& snapshot = line.pending.emplace_back();
    std::memcpy(snapshot.data(), base_ + l * cache_line, cache_line);
    line.newest_version += 1;
    version = line.newest_version;
  }
  record({.what = trace_event::type::store, .persisted = a.persisted, .shared = a.shared,
          .thread = thread_number(), .size = static_cast<std::uint32_t>(n), .offset = offset,
          .version = version});
}

void model::loaded(access a, const void* p, std::size_t n) {
  if (!tracing_) return;
  auto offset = static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - base_);
  record({.what = trace_event::type::load, .persisted = a.persisted, .shared = a.shared,
          .thread = thread_number(), .size = static_cast<std::uint32_t>(n), .offset = offset,
          .version = lines_[offset / cache_line].newest_version});
}

void model::pwb(const void* p) {
  if (!contains(p)) return;
  next_event(event_kind::pwb);
  std::lock_guard lock(mutex_);
  auto offset = static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - base_);
  std::size_t l = offset / cache_line;
  const line_state& line = lines_[l];
  if (line.newest_version > line.durable_version) {
    unfenced_[std::this_thread::get_id()].push_back({l, line.newest_version});
  }
  record({.what = trace_event::type::pwb, .thread = thread_number(), .offset = offset,
          .version = line.newest_version});
}

void model::pfence() {
  next_event(event_kind::pfence);
  std::lock_guard lock(mutex_);
  auto it = unfenced_.find(std::this_thread::get_id());
  if (it != unfenced_.end()) {
    for (const pending_writeback& w : it->second) {
      line_state& line = lines_[w.line];
      if (w.version <= line.durable_version) continue;
      std::uint64_t drop = w.version - line.durable_version;
      std::memcpy(durable_.get() + w.line * cache_line, line.pending[drop - 1].data(),
                  cache_line);
      line.pending.erase(line.pending.begin(),
                         line.pending.begin() + static_cast<std::ptrdiff_t>(drop));
      line.durable_version = w.version;
    }
    it->second.clear();
  }
  record({.what = trace_event::type::pfence, .thread = thread_number()});
}

void model::operation_completed() {
  std::lock_guard lock(mutex_);
  record({.what = trace_event::type::complete, .thread = thread_number()});
}

std::vector<std::byte> model::crash(writeback policy, std::uint64_t seed) const {
  std::lock_guard lock(mutex_);
  std::vector<std::byte> image(durable_.get(), durable_.get() + size_);
  for (std::size_t l = 0; l < lines_.size(); ++l) {
    const line_state& line = lines_[l];
    if (line.pending.empty()) continue;
    std::size_t reached = 0;  // how many pending versions reached memory
    switch (policy) {
      case writeback::none: reached = 0; break;
      case writeback::all: reached = line.pending.size(); break;
      case writeback::random:
        reached = splitmix64(seed ^ splitmix64(l)) % (line.pending.size() + 1);
        break;
    }
    if (reached > 0) {
      std::memcpy(image.data() + l * cache_line, line.pending[reached - 1].data(), cache_line);
    }
  }
  return image;
}

void model::persist_all() {
  std::lock_guard lock(mutex_);
  std::memcpy(durable_.get(), base_, size_);
  for (line_state& line : lines_) {
    line.pending.clear();
    line.durable_version = line.newest_version;
  }
  unfenced_.clear();
}

void model::load_image(std::span<const std::byte> image) {
  if (image.size() != size_) throw std::invalid_argument("pv::model: image of wrong size");
  std::lock_guard lock(mutex_);
  std::memcpy(base_, image.data(), size_);
  std::memcpy(durable_.get(), image.data(), size_);
  for (line_state& line : lines_) {
    line.pending.clear();
    line.durable_version = line.newest_version;
  }
  unfenced_.clear();
}

void model::set_event_hook(event_hook hook) {
  std::lock_guard lock(mutex_);
  hook_ = std::move(hook);
}

void model::set_tracing(bool on) {
  std::lock_guard lock(mutex_);
  tracing_ = on;
}

std::vector<trace_event> model::trace() const {
  std::lock_guard lock(mutex_);
  return trace_;
}

// ---- scoped_activation -------------------------------------------------------------------

scoped_activation::scoped_activation(model& m) {
  model* expected = nullptr;
  if (!model::active_.compare_exchange_strong(expected, &m, std::memory_order_acq_rel)) {
    throw std::logic_error("pv::scoped_activation: another model is already active");
  }
}

scoped_activation::~scoped_activation() {
  model::active_.store(nullptr, std::memory_order_release);
}

}  // namespace pv
