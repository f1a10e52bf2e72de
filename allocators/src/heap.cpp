#include <algorithm>
#include <bit>
#include <cstring>

#include "allocators/internal/heap_core.hpp"

namespace alloc::detail {

namespace {

using format::chunk_kind;
using format::chunk_tag;

// Cached blocks per class: about 32 KiB per class, between 2 and 64 blocks.
std::uint32_t cache_capacity(unsigned c) {
  return std::clamp<std::uint32_t>(32768 / pmem_classes::sizes[c], 2, 64);
}

std::uint64_t words_for(std::uint32_t bits) { return (bits + 63) / 64; }

std::string offset_text(std::uint64_t offset) { return "offset " + std::to_string(offset); }

}  // namespace

heap_core::heap_core(const pool& p, const persist_ops& ops)
    : huge_pages_(p.huge_pages()),
      base_(p.base()),
      heap_offset_(p.heap_begin()),
      chunk_count_((p.heap_end() - p.heap_begin()) >> format::chunk_shift),
      ops_(ops),
      pool_name_(p.name()),
      chunk_class_(std::make_unique<std::atomic<std::uint8_t>[]>(chunk_count_)),
      chunks_(std::make_unique<chunk_state[]>(chunk_count_)),
      free_chunks_(words_for(static_cast<std::uint32_t>(chunk_count_)), 0) {
  // Live marks need a bitmap in every chunk that holds a small class.
  for (std::uint64_t i = 0; i < chunk_count_; ++i) {
    chunk_class_[i].store(chunk_free, std::memory_order_relaxed);
    const chunk_tag tag = stored_tag(i);
    if (tag.kind() != chunk_kind::small) continue;
    const unsigned c = pmem_classes::exact(tag.argument());
    if (c == pmem_classes::count) continue;  // mark_live will reject offsets in this chunk
    chunks_[i].bits.assign(words_for(blocks_per_chunk(c)), 0);
  }
}

heap_core::~heap_core() {
  for (heap_cache* cache : caches_) delete cache;
}

chunk_tag heap_core::stored_tag(std::uint64_t index) const noexcept {
  chunk_tag tag;
  std::memcpy(&tag, base_ + format::chunk_table_offset + index * sizeof(chunk_tag), sizeof tag);
  return tag;
}

void heap_core::write_tags(std::uint64_t first, const chunk_tag* tags, std::uint64_t n) {
  ops_.write(base_ + format::chunk_table_offset + first * sizeof(chunk_tag), tags,
             n * sizeof(chunk_tag));
  ops_.fence();
}

// ---- recovery ----------------------------------------------------------------------------

status heap_core::mark_live(std::uint64_t offset, std::size_t bytes) {
  const std::uint64_t heap_end = chunk_base(chunk_count_);
  if (offset < heap_offset_ || offset >= heap_end) {
    return error(errc::corruption, pool_name_ + ": " + offset_text(offset) +
                                       " is outside the heap [" + std::to_string(heap_offset_) +
                                       ", " + std::to_string(heap_end) + ")");
  }
  const std::uint64_t index = (offset - heap_offset_) >> format::chunk_shift;
  const std::uint64_t within = offset - chunk_base(index);
  const chunk_tag tag = stored_tag(index);
  switch (tag.kind()) {
    case chunk_kind::small: {
      const unsigned c = pmem_classes::exact(tag.argument());
      if (c == pmem_classes::count) {
        return error(errc::corruption, pool_name_ + ": chunk " + std::to_string(index) +
                                           " has an unknown block size " +
                                           std::to_string(tag.argument()));
      }
      const std::uint32_t size = pmem_classes::sizes[c];
      if (within % size != 0 || within / size >= blocks_per_chunk(c)) {
        return error(errc::corruption, pool_name_ + ": " + offset_text(offset) +
                                           " is not the start of a block (chunk " +
                                           std::to_string(index) + " holds blocks of " +
                                           std::to_string(size) + " bytes)");
      }
      // The block must be one that allocate(bytes) hands out: a damaged tag that shrank the
      // class would otherwise hand the rest of a live block out again.
      if (bytes > pmem_classes::max || pmem_classes::of(bytes) != c) {
        return error(errc::corruption, pool_name_ + ": the block at " + offset_text(offset) +
                                           " holds " + std::to_string(bytes) +
                                           " bytes, but chunk " + std::to_string(index) +
                                           " holds blocks of " + std::to_string(size) +
                                           " bytes (its tag may be damaged)");
      }
      const std::uint64_t block = within / size;
      std::atomic_ref<std::uint64_t>(chunks_[index].bits[block / 64])
          .fetch_or(std::uint64_t{1} << (block % 64), std::memory_order_relaxed);
      return {};
    }
    case chunk_kind::large_head:
      if (within != 0 || tag.argument() == 0 || tag.argument() > chunk_count_ - index) {
        return error(errc::corruption,
                     pool_name_ + ": " + offset_text(offset) +
                         " is not the start of a large block (chunk " + std::to_string(index) +
                         " heads a large block of " + std::to_string(tag.argument()) +
                         " chunks)");
      }
      if (bytes <= pmem_classes::max ||
          tag.argument() != (bytes + format::chunk_size - 1) / format::chunk_size) {
        return error(errc::corruption,
                     pool_name_ + ": the block at " + offset_text(offset) + " holds " +
                         std::to_string(bytes) + " bytes, but chunk " + std::to_string(index) +
                         " heads a large block of " + std::to_string(tag.argument()) +
                         " chunks (its tag may be damaged)");
      }
      chunks_[index].live_large.store(true, std::memory_order_relaxed);
      return {};
    default:
      return error(errc::corruption, pool_name_ + ": " + offset_text(offset) +
                                         " lies in chunk " + std::to_string(index) +
                                         ", which holds no block start (tag " +
                                         std::to_string(tag.bits) + ")");
  }
}

status heap_core::finish_recovery() {
  if (ready_) {
    return error(errc::invalid_argument, pool_name_ + ": finish_recovery() called twice");
  }
  std::int64_t in_use = 0;
  std::uint64_t used_end = 0;  // the end of the last chunk in use
  for (std::uint64_t i = 0; i < chunk_count_; ++i) {
    chunk_state& ch = chunks_[i];
    const chunk_tag tag = stored_tag(i);
    if (tag.kind() == chunk_kind::large_head && ch.live_large.load(std::memory_order_relaxed)) {
      const std::uint64_t n = tag.argument();
      for (std::uint64_t j = 1; j < n; ++j) {
        if (stored_tag(i + j) != chunk_tag::make(chunk_kind::large_tail, i) ||
            chunks_[i + j].live_large.load(std::memory_order_relaxed)) {
          return error(errc::corruption,
                       pool_name_ + ": the large block at chunk " + std::to_string(i) + " (" +
                           std::to_string(n) + " chunks) overlaps chunk " +
                           std::to_string(i + j) + " (tag " +
                           std::to_string(stored_tag(i + j).bits) + ")");
        }
      }
      ch.large_chunks = static_cast<std::uint32_t>(n);
      chunk_class_[i].store(chunk_large_head, std::memory_order_relaxed);
      for (std::uint64_t j = 1; j < n; ++j) {
        chunk_class_[i + j].store(chunk_large_tail, std::memory_order_relaxed);
      }
      in_use += static_cast<std::int64_t>(n * format::chunk_size);
      used_end = chunk_base(i + n);
      i += n - 1;
      continue;
    }
    std::uint32_t live = 0;
    for (std::uint64_t w : ch.bits) live += static_cast<std::uint32_t>(std::popcount(w));
    if (live == 0) {
      set_free(i, 1, true);
      continue;
    }
    const unsigned c = pmem_classes::exact(tag.argument());
    const std::uint32_t blocks = blocks_per_chunk(c);
    for (std::size_t w = 0; w < ch.bits.size(); ++w) {
      std::uint64_t valid = ~std::uint64_t{0};
      if (w == ch.bits.size() - 1 && blocks % 64 != 0) valid = (std::uint64_t{1} << (blocks % 64)) - 1;
      ch.bits[w] = ~ch.bits[w] & valid;
    }
    ch.free_count = blocks - live;
    ch.scan = 0;
    chunk_class_[i].store(static_cast<std::uint8_t>(c), std::memory_order_relaxed);
    if (ch.free_count > 0) link(c, static_cast<std::int64_t>(i));
    in_use += static_cast<std::int64_t>(live) * pmem_classes::sizes[c];
    used_end = chunk_base(i + 1);
  }
  {
    std::lock_guard lock(caches_mutex_);
    retired_in_use_ += in_use;
  }
  if (used_end != 0) huge_pages_.back(used_end);
  ready_ = true;
  return {};
}

bool heap_core::untouched() const noexcept {
  for (std::uint64_t i = 0; i < chunk_count_; ++i) {
    if (stored_tag(i).kind() != chunk_kind::unassigned) return false;
  }
  return true;
}

// ---- chunks ------------------------------------------------------------------------------

void heap_core::set_free(std::uint64_t first, std::uint64_t n, bool free) noexcept {
  for (std::uint64_t i = first; i < first + n; ++i) {
    const std::uint64_t bit = std::uint64_t{1} << (i % 64);
    if (free) {
      free_chunks_[i / 64] |= bit;
      chunk_class_[i].store(chunk_free, std::memory_order_relaxed);
    } else {
      free_chunks_[i / 64] &= ~bit;
    }
  }
  if (free) {
    free_chunk_count_ += n;
    first_free_hint_ = std::min(first_free_hint_, first);
  } else {
    free_chunk_count_ -= n;
  }
}

std::int64_t heap_core::find_free_run(std::uint64_t n) const noexcept {
  if (n == 0 || n > free_chunk_count_) return -1;
  std::uint64_t run = 0;
  for (std::uint64_t w = first_free_hint_ / 64; w < free_chunks_.size(); ++w) {
    std::uint64_t bits = free_chunks_[w];
    if (bits == 0) {
      run = 0;
      continue;
    }
    if (n == 1) return static_cast<std::int64_t>(w * 64 + std::countr_zero(bits));
    for (unsigned b = 0; b < 64; ++b) {
      const std::uint64_t i = w * 64 + b;
      if (i >= chunk_count_) return -1;
      if ((bits >> b) & 1) {
        if (++run == n) return static_cast<std::int64_t>(i + 1 - n);
      } else {
        run = 0;
      }
    }
  }
  return -1;
}

result<std::int64_t> heap_core::take_chunk(unsigned c) {
  std::int64_t index;
  {
    std::lock_guard lock(chunk_mutex_);
    index = find_free_run(1);
    if (index < 0) return exhausted(pmem_classes::sizes[c]);
    set_free(static_cast<std::uint64_t>(index), 1, false);
    first_free_hint_ = static_cast<std::uint64_t>(index);
  }
  huge_pages_.back(chunk_base(static_cast<std::uint64_t>(index) + 1));
  // The chunk is ours: make its tag durable before any block of it is handed out.
  const chunk_tag tag = chunk_tag::make(chunk_kind::small, pmem_classes::sizes[c]);
  if (stored_tag(static_cast<std::uint64_t>(index)) != tag) {
    write_tags(static_cast<std::uint64_t>(index), &tag, 1);
  }
  chunk_class_[index].store(static_cast<std::uint8_t>(c), std::memory_order_relaxed);
  fill_free_map(chunks_[index], c);
  return index;
}

void heap_core::fill_free_map(chunk_state& ch, unsigned c) {
  const std::uint32_t blocks = blocks_per_chunk(c);
  ch.bits.assign(words_for(blocks), ~std::uint64_t{0});
  if (blocks % 64 != 0) ch.bits.back() = (std::uint64_t{1} << (blocks % 64)) - 1;
  ch.free_count = blocks;
  ch.scan = 0;
}

void heap_core::release_chunk(std::uint64_t index) noexcept {
  std::lock_guard lock(chunk_mutex_);
  set_free(index, 1, true);
}

error heap_core::exhausted(std::size_t bytes) const {
  return error(errc::no_space, "pool " + pool_name_ + " has no space for a block of " +
                                   std::to_string(bytes) + " bytes (" +
                                   std::to_string(free_chunk_count_) + " of " +
                                   std::to_string(chunk_count_) + " chunks of " +
                                   std::to_string(format::chunk_size) + " bytes free)");
}

void heap_core::link(unsigned c, std::int64_t index) noexcept {
  chunk_state& ch = chunks_[index];
  ch.prev = -1;
  ch.next = classes_[c].head;
  if (ch.next >= 0) chunks_[ch.next].prev = index;
  classes_[c].head = index;
}

void heap_core::unlink(unsigned c, std::int64_t index) noexcept {
  chunk_state& ch = chunks_[index];
  if (ch.prev >= 0) {
    chunks_[ch.prev].next = ch.next;
  } else {
    classes_[c].head = ch.next;
  }
  if (ch.next >= 0) chunks_[ch.next].prev = ch.prev;
  ch.prev = ch.next = -1;
}

// ---- small blocks ------------------------------------------------------------------------

status heap_core::refill(heap_cache& cache, unsigned c) {
  if (!ready_) {
    return error(errc::invalid_argument,
                 pool_name_ + ": allocation before finish_recovery()");
  }
  heap_cache::bin& bin = cache.bins[c];
  const std::uint32_t want = std::max<std::uint32_t>(1, bin.capacity / 2);
  const std::uint32_t size = pmem_classes::sizes[c];
  std::lock_guard lock(classes_[c].mutex);
  std::uint32_t got = 0;
  while (got < want) {
    std::int64_t index = classes_[c].head;
    if (index < 0) {
      if (got > 0) break;
      result<std::int64_t> taken = take_chunk(c);
      if (!taken) return std::move(taken).error();
      index = *taken;
      link(c, index);
    }
    chunk_state& ch = chunks_[index];
    const std::uint64_t base = chunk_base(static_cast<std::uint64_t>(index));
    std::uint32_t w = ch.scan;
    while (got < want && ch.free_count > 0) {
      while (ch.bits[w] == 0) ++w;
      const unsigned b = static_cast<unsigned>(std::countr_zero(ch.bits[w]));
      ch.bits[w] &= ch.bits[w] - 1;
      bin.slots[bin.count++] = base + (std::uint64_t{w} * 64 + b) * size;
      --ch.free_count;
      ++got;
    }
    ch.scan = w;
    if (ch.free_count == 0) unlink(c, index);
  }
  return {};
}

void heap_core::drain(heap_cache& cache, unsigned c, std::uint32_t n) noexcept {
  heap_cache::bin& bin = cache.bins[c];
  n = std::min(n, bin.count);
  const std::uint32_t size = pmem_classes::sizes[c];
  const std::uint32_t blocks = blocks_per_chunk(c);
  {
    std::lock_guard lock(classes_[c].mutex);
    for (std::uint32_t k = 0; k < n; ++k) {
      const std::uint64_t offset = bin.slots[k];
      const std::uint64_t index = (offset - heap_offset_) >> format::chunk_shift;
      chunk_state& ch = chunks_[index];
      const std::uint64_t block = (offset - chunk_base(index)) / size;
      const auto w = static_cast<std::uint32_t>(block / 64);
      ch.bits[w] |= std::uint64_t{1} << (block % 64);
      ch.scan = std::min(ch.scan, w);
      if (++ch.free_count == 1) link(c, static_cast<std::int64_t>(index));
      if (ch.free_count == blocks) {
        unlink(c, static_cast<std::int64_t>(index));
        release_chunk(index);
      }
    }
  }
  std::memmove(bin.slots, bin.slots + n, (bin.count - n) * sizeof(std::uint64_t));
  bin.count -= n;
}

// ---- large blocks ------------------------------------------------------------------------

result<pptr<>> heap_core::allocate_large(std::size_t bytes) {
  if (!ready_) {
    return error(errc::invalid_argument,
                 pool_name_ + ": allocation before finish_recovery()");
  }
  std::uint64_t n = 0;
  std::int64_t first = -1;
  {
    std::lock_guard lock(chunk_mutex_);
    if (bytes <= chunk_count_ * format::chunk_size) {
      n = (bytes + format::chunk_size - 1) / format::chunk_size;
      first = find_free_run(n);
    }
    if (first < 0) return exhausted(bytes);
    set_free(static_cast<std::uint64_t>(first), n, false);
  }
  const auto head = static_cast<std::uint64_t>(first);
  huge_pages_.back(chunk_base(head + n));
  std::vector<chunk_tag> tags(n, chunk_tag::make(chunk_kind::large_tail, head));
  tags[0] = chunk_tag::make(chunk_kind::large_head, n);
  // Rewrite the tags only from the first one that differs.
  std::uint64_t from = 0;
  while (from < n && stored_tag(head + from) == tags[from]) ++from;
  if (from < n) write_tags(head + from, tags.data() + from, n - from);
  chunks_[head].large_chunks = static_cast<std::uint32_t>(n);
  for (std::uint64_t j = 1; j < n; ++j) {
    chunk_class_[head + j].store(chunk_large_tail, std::memory_order_relaxed);
  }
  chunk_class_[head].store(chunk_large_head, std::memory_order_release);
  large_in_use_.fetch_add(static_cast<std::int64_t>(n * format::chunk_size),
                          std::memory_order_relaxed);
  return pptr<>(chunk_base(head));
}

void heap_core::free_large(std::uint64_t offset) noexcept {
  const std::uint64_t head = (offset - heap_offset_) >> format::chunk_shift;
  const std::uint64_t n = chunks_[head].large_chunks;
  large_in_use_.fetch_sub(static_cast<std::int64_t>(n * format::chunk_size),
                          std::memory_order_relaxed);
  std::lock_guard lock(chunk_mutex_);
  set_free(head, n, true);
}

std::size_t heap_core::usable_size(std::uint64_t offset) const noexcept {
  const std::uint8_t c = chunk_class(offset);
  if (c < pmem_classes::count) return pmem_classes::sizes[c];
  const std::uint64_t head = (offset - heap_offset_) >> format::chunk_shift;
  return chunks_[head].large_chunks * format::chunk_size;
}

heap_stats heap_core::stats() const {
  heap_stats s;
  s.capacity_bytes = chunk_count_ * format::chunk_size;
  s.chunks = chunk_count_;
  std::int64_t in_use = large_in_use_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(caches_mutex_);
    in_use += retired_in_use_;
    for (const heap_cache* cache : caches_) in_use += cache->in_use.load(std::memory_order_relaxed);
  }
  s.in_use_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(in_use, 0));
  std::lock_guard lock(chunk_mutex_);
  s.free_chunks = free_chunk_count_;
  return s;
}

// ---- thread caches -----------------------------------------------------------------------

void* heap_core::create_thread_state() {
  auto cache = std::make_unique<heap_cache>();
  std::size_t total = 0;
  for (unsigned c = 0; c < pmem_classes::count; ++c) total += cache_capacity(c);
  cache->storage = std::make_unique<std::uint64_t[]>(total);
  std::uint64_t* next = cache->storage.get();
  for (unsigned c = 0; c < pmem_classes::count; ++c) {
    cache->bins[c].capacity = cache_capacity(c);
    cache->bins[c].slots = next;
    next += cache_capacity(c);
  }
  std::lock_guard lock(caches_mutex_);
  caches_.push_back(cache.get());
  return cache.release();
}

void heap_core::release_thread_state(void* state) noexcept {
  auto* cache = static_cast<heap_cache*>(state);
  for (unsigned c = 0; c < pmem_classes::count; ++c) drain(*cache, c, cache->bins[c].count);
  std::lock_guard lock(caches_mutex_);
  retired_in_use_ += cache->in_use.load(std::memory_order_relaxed);
  std::erase(caches_, cache);
  delete cache;
}

}  // namespace alloc::detail
