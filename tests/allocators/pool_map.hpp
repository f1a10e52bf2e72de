// A crash-test subject (crashtest::map_subject) built on the allocators layer: a lock-free
// map from small keys to values, where each entry is a block of the persistent allocator in
// a pool laid over the model's region, linked from a slot of the pool's root area.
//
//   insert: allocate a block (several classes, sometimes a large block), write the entry,
//           publish it with a CAS on the key's slot (free the block if the key was taken);
//   remove: exchange the slot with null, complete (the unlink is durable), retire the block
//           to the epoch domain and collect, which frees it into the allocator once no
//           reader holds it;
//   get:    pinned, read the slot and the entry (an entry that does not check out means a
//           block was reclaimed under a reader: the operation throws).
//
// Recovery is the allocator's contract: open the pool, walk the slots, mark_live each block,
// finish_recovery. It then checks what the allocator promises, and throws
// crashtest::invariant_violation if it does not hold: allocating everything there is (whole
// chunks, then every class) never hands out a block that overlaps a linked one, and leaves
// no chunk space unaccounted for (a block allocated before the crash but not linked is
// free again).
//
// Thread safety: insert, remove and get may run on any threads at once.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "alloc_support.hpp"
#include "crashtest/harness.hpp"

namespace alloc_test {

template <class Policy>
class pool_map {
 public:
  static constexpr bool ordered = true;
  static constexpr std::uint64_t max_keys = 64;
  // A pool of 16 chunks. What it must hold at once: the live entries (at most two large
  // blocks of two chunks each, and small blocks that fit a chunk per class), each writer's
  // partly used chunk per small class (3 classes), and the blocks retired but not yet
  // reclaimed. remove() collects after every retirement, so those are the blocks of the last
  // two epochs: a few per writer, not the 32 a thread may retire between collections
  // otherwise (which, with large blocks among them, filled the pool: issue 10, defect 8).
  static constexpr std::size_t region_bytes = alloc::format::chunk_table_offset +
                                              alloc::format::page_size +
                                              16 * alloc::format::chunk_size;

  pool_map(pv::model& m, crashtest::start how)
      : pool_(open_pool(m, how)), heap_(pool_), root_(pool_.root_as<root>()) {
    if (how == crashtest::start::fresh) {
      finish(heap_.finish_recovery());
      return;
    }
    std::vector<alloc::pptr<>> live;
    for (std::uint64_t key = 1; key <= max_keys; ++key) {
      auto& slot = root_->slots[key];
      slot.reset_metadata();
      const alloc::pptr<> b = slot.load(flit::volatile_, flit::private_);
      if (!b) continue;
      const std::uint64_t value = read_entry(b, key, "recovery");
      finish(heap_.mark_live(b, block_size(key, value)));
      live.push_back(b);
    }
    finish(heap_.finish_recovery());
    check_allocator(live);
  }

  bool insert(std::uint64_t key, std::uint64_t value) {
    auto& slot = root_->slots[checked(key)];
    if (slot.load()) {
      Policy::operation_completion();
      return false;
    }
    auto b = heap_.allocate(block_size(key, value));
    if (!b) throw std::length_error(b.error().to_string());
    const entry e{key, value, key ^ value ^ magic};
    Policy::write_range(pool_.get(*b), &e, sizeof e, flit::persisted);
    alloc::pptr<> expected{};
    const bool linked = slot.compare_exchange(expected, *b);
    if (!linked) heap_.free(*b);  // never reachable: free at once
    Policy::operation_completion();
    return linked;
  }

  bool remove(std::uint64_t key) {
    const alloc::pptr<> old = root_->slots[checked(key)].exchange(alloc::pptr<>());
    Policy::operation_completion();  // the unlink is durable before the block is retired
    if (!old) return false;
    domain_.retire(heap_, old);
    domain_.collect();  // keeps what waits for reclamation small (see region_bytes)
    return true;
  }

  std::optional<std::uint64_t> get(std::uint64_t key) {
    auto pinned = domain_.pin();
    const alloc::pptr<> b = root_->slots[checked(key)].load();
    std::optional<std::uint64_t> value;
    if (b) value = read_entry(b, key, "get");
    Policy::operation_completion();
    return value;
  }

  std::vector<crashtest::kv_entry> state() const {
    std::vector<crashtest::kv_entry> out;
    for (std::uint64_t key = 1; key <= max_keys; ++key) {
      const alloc::pptr<> b = root_->slots[key].load(flit::volatile_, flit::private_);
      if (b) out.push_back({key, read_entry(b, key, "state"), 0});
    }
    return out;
  }

 private:
  static constexpr std::uint64_t magic = 0x706f6f6c6d617031ULL;  // "poolmap1"
  struct root {
    flit::persist<alloc::pptr<>, Policy> slots[max_keys + 1];
  };
  struct entry {
    std::uint64_t key, value, check;
  };

  static alloc::pool open_pool(pv::model& m, crashtest::start how) {
    const std::span<std::byte> region(m.base(), m.size());
    auto p = how == crashtest::start::fresh
                 ? alloc::pool::create_in<Policy>(region, layout_for<Policy>("pool_map"))
                 : alloc::pool::open_in(region, layout_for<Policy>("pool_map"));
    if (!p) throw crashtest::invariant_violation("pool_map: " + p.error().to_string());
    return std::move(p).value();
  }
  static void finish(const alloc::status& s) {
    if (!s) throw crashtest::invariant_violation("pool_map: " + s.error().to_string());
  }
  static std::uint64_t checked(std::uint64_t key) {
    if (key == 0 || key > max_keys) throw std::out_of_range("pool_map: key out of range");
    return key;
  }
  // Several small classes, and now and then a large block of two chunks, only for keys
  // that are multiples of 8 (so at most two are live: see region_bytes).
  static std::size_t block_size(std::uint64_t key, std::uint64_t value) {
    if (key % 8 == 0 && value % 3 == 0) return 70000;
    return sizeof(entry) + (value % 3) * 300;
  }

  std::uint64_t read_entry(alloc::pptr<> b, std::uint64_t key, const char* where) const {
    if (b.offset() < pool_.heap_begin() || b.offset() + sizeof(entry) > pool_.heap_end() ||
        b.offset() % 16 != 0) {
      throw crashtest::invariant_violation(std::string("pool_map ") + where + ": key " +
                                           std::to_string(key) + " links offset " +
                                           std::to_string(b.offset()) + ", outside the heap");
    }
    entry e;
    std::memcpy(&e, pool_.get(b), sizeof e);
    if (e.key != key || e.check != (e.key ^ e.value ^ magic)) {
      throw crashtest::invariant_violation(std::string("pool_map ") + where + ": the block of key " +
                                           std::to_string(key) + " at offset " +
                                           std::to_string(b.offset()) + " does not hold its entry");
    }
    return e.value;
  }

  // After recovery: allocate all there is and account for every byte of every chunk.
  void check_allocator(const std::vector<alloc::pptr<>>& live) {
    std::map<std::uint64_t, std::uint64_t> taken;  // offset -> end, live and handed out
    std::map<std::uint64_t, std::uint64_t> covered;  // chunk -> bytes in blocks
    std::map<std::uint64_t, std::uint64_t> block_of;  // chunk -> its block size
    auto add = [&](alloc::pptr<> b, const char* what) {
      const std::uint64_t begin = b.offset(), end = begin + heap_.usable_size(b);
      auto next = taken.lower_bound(begin);
      if ((next != taken.end() && next->first < end) ||
          (next != taken.begin() && std::prev(next)->second > begin)) {
        throw crashtest::invariant_violation(std::string("pool_map: ") + what + " block at " +
                                             std::to_string(begin) +
                                             " overlaps another: handed out twice");
      }
      taken[begin] = end;
      const std::uint64_t size = std::min<std::uint64_t>(end - begin, alloc::format::chunk_size);
      for (std::uint64_t at = begin; at < end; at += alloc::format::chunk_size) {
        const std::uint64_t chunk = (at - pool_.heap_begin()) / alloc::format::chunk_size;
        covered[chunk] += size;
        block_of[chunk] = size;
      }
    };
    for (alloc::pptr<> b : live) add(b, "a linked");
    std::vector<std::size_t> sizes = {alloc::format::chunk_size};
    sizes.insert(sizes.end(), alloc::detail::pmem_classes::sizes.begin(),
                 alloc::detail::pmem_classes::sizes.end());
    std::vector<alloc::pptr<>> handed_out;
    for (std::size_t s : sizes) {
      alloc::result<alloc::pptr<>> r = alloc::pptr<>();
      while ((r = heap_.allocate(s)).has_value()) {
        add(*r, "an allocated");
        handed_out.push_back(*r);
      }
    }
    const std::uint64_t chunks = (pool_.heap_end() - pool_.heap_begin()) / alloc::format::chunk_size;
    for (std::uint64_t chunk = 0; chunk < chunks; ++chunk) {
      const std::uint64_t size = block_of[chunk];
      const std::uint64_t expected =
          size == 0 ? alloc::format::chunk_size : alloc::format::chunk_size / size * size;
      if (covered[chunk] != expected) {
        throw crashtest::invariant_violation(
            "pool_map: after recovery, " + std::to_string(expected - covered[chunk]) +
            " bytes of chunk " + std::to_string(chunk) + " are neither linked nor free");
      }
    }
    for (alloc::pptr<> b : handed_out) heap_.free(b);
  }

  alloc::pool pool_;
  alloc::persistent_allocator<Policy> heap_;
  alloc::epoch_domain domain_;  // destroyed first: it frees what it holds into heap_
  root* root_;
};

}  // namespace alloc_test
