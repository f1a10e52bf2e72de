// A packed run: a sorted map kept in packed nodes (packed.hpp) chained from a head word, with
// a DRAM index of each node's first key. It is the planned packed tier's store
// (docs/engine-design.md, "The packed tier"): changes reach it in sorted batches, merged
// node by node; a node is never changed in place except for its successor word.
//
// A batch (apply) goes through the nodes its keys fall in, in key order. For each: its
// records and the batch's changes to it are merged, the result is packed into new nodes
// (none if every key was erased; several if it outgrew one), the new nodes are written and
// fenced, and one store to the predecessor's successor word (or the head) swaps them in for
// the old node, which is freed once that swap is durable.
//
// Invariants (of the durable state, at every persistence event):
//  (1) The chain from the head names whole nodes, each written and fenced before the store
//      that first named it, in ascending key order across nodes.
//  (2) Each node holds, for the keys of its range, the values of the batches applied before
//      its swap: a crash inside a batch leaves each key with its value before the batch or
//      after it (a batch is atomic per node, not as a whole; the engine's per-key list
//      keeps every key of a merge until the merge is durable, so the tier needs no more).
//  (3) A block is freed only after the swap that unlinked it is durable, and every block
//      the chain names is marked live at recovery: the allocator's contract (U1)-(U3).
//
// Errors: a damaged node or successor word is reported as Corruption (at recovery, or by
// the get that meets it), never read as data; no space is NoSpace, after which the run is
// what the swaps before it made of it, and still usable.
//
// Thread safety: one thread at a time (apply, get and for_each alike). Sharing it with
// readers needs the engine's epochs; the packed tier is not yet part of the engine.
// Persistence: apply's changes are durable when it returns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "allocators/persistent_allocator.hpp"
#include "allocators/pool.hpp"
#include "flintkv/internal/packed.hpp"
#include "flintkv/status.hpp"

namespace flintkv::internal {

template <class Policy, class Mode>
class packed_run {
 public:
  using head_word = flit::persist<stored_offset, Policy>;
  using heap = alloc::persistent_allocator<Policy>;
  using view = packed_view<Policy, Mode>;

  // A change of a batch: a value for the key, or its erasure.
  struct change {
    std::string_view key;
    std::string_view value;
    bool erase = false;
  };

  // Writes an empty run's head (null), written back; the caller fences.
  static void make_empty(head_word* head, word_place head_place) {
    durable<Policy, Mode>::put(*head, offset_word(node_offset{0}, head_place));
    durable<Policy, Mode>::flush(*head);
  }

  // The run whose head is `*head` (at `head_place`), with nodes of `node_bytes` (records too
  // large for one take a block of their own). Call recover() before anything else. The node
  // size is part of the run's format: recovery marks each block live as that size (or the
  // node's own, if larger), so a run is always opened with the size it was written with.
  packed_run(const alloc::pool& pool, heap& h, head_word* head, word_place head_place,
             std::size_t node_bytes)
      : pool_(pool), heap_(h), head_(head), head_place_(head_place), node_bytes_(node_bytes) {}

  // Walks the chain: checks every node (its successor word, its header and every record),
  // that the keys ascend across nodes and that each block lies in the heap; rebuilds the
  // index; marks each block live when `mark_live` (the allocator's recovery; the caller
  // calls finish_recovery after). Corruption names the node's offset.
  Status recover(bool mark_live) {
    index_.clear();
    auto at = read_offset_word(durable<Policy, Mode>::get(*head_), head_place_);
    std::string last, key;
    std::size_t walked = 0;
    while (true) {
      if (!at) return Status::Corruption("packed run: a damaged successor word");
      const node_offset here = *at;
      if (here.value == 0) return Status::OK();
      if (here.value < pool_.heap_begin() || here.value >= pool_.heap_end() || here.value % 64 != 0 ||
          ++walked > (pool_.heap_end() - pool_.heap_begin()) / 64) {
        return Status::Corruption("packed run: a node offset outside the heap, or a cycle: " +
                                  std::to_string(here.value));
      }
      const auto v = view::open(node(here), here, pool_.heap_end() - here.value, true);
      if (!v) return Status::Corruption("packed run: damaged node at " + std::to_string(here.value));
      // The block it was allocated as (apply): node_bytes, or its own size if larger.
      const std::size_t bytes = std::max(node_bytes_, v->bytes());
      if (bytes > pool_.heap_end() - here.value) {
        return Status::Corruption("packed run: the node at " + std::to_string(here.value) +
                                  " runs past the heap");
      }
      for (std::size_t i = 0; i < v->size(); ++i) {
        const auto r = v->record(i, true);
        if (!r) {
          return Status::Corruption("packed run: damaged record in the node at " +
                                    std::to_string(here.value));
        }
        key.assign(v->prefix()).append(r->suffix);
        if (!(index_.empty() && i == 0) && compare_keys(last, key) >= 0) {
          return Status::Corruption("packed run: keys out of order in the node at " +
                                    std::to_string(here.value));
        }
        if (i == 0) index_.push_back({key, here, bytes});
        last.swap(key);
      }
      if (mark_live) {
        if (auto s = heap_.mark_live(alloc::pptr<>(here.value), bytes); !s) {
          return Status::Corruption("packed run: " + s.error().to_string());
        }
      }
      at = packed_next<Policy, Mode>(node(here), here);
    }
  }

  std::size_t nodes() const { return index_.size(); }
  // The blocks' bytes, for space accounting.
  std::size_t block_bytes() const {
    std::size_t n = 0;
    for (const ref& r : index_) n += r.bytes;
    return n;
  }

  // The node whose range holds `key` (its block's offset and bytes), or nullopt if the run is
  // empty.
  std::optional<std::pair<node_offset, std::size_t>> locate(std::string_view key) const {
    if (index_.empty()) return std::nullopt;
    const ref& r = index_[node_for(key)];
    return std::pair{r.at, r.bytes};
  }

  // The value of `key` into *value: OK, NotFound, or Corruption.
  Status get(std::string_view key, std::string* value, bool verify = true) const {
    if (index_.empty()) return Status::NotFound("");
    const ref& r = index_[node_for(key)];
    const auto v = view::open(node(r.at), r.at, r.bytes, verify);
    if (!v) return damaged(r.at);
    const auto f = v->find(key, verify);
    if (f.kind == view::found::damaged) return damaged(r.at);
    if (f.kind == view::found::no) return Status::NotFound("");
    value->assign(f.value);
    return Status::OK();
  }

  // Calls fn(key, value) for every key in order; Corruption if a record is damaged.
  template <class Fn>
  Status for_each(Fn&& fn) const {
    std::string key;
    for (const ref& r : index_) {
      const auto v = view::open(node(r.at), r.at, r.bytes, true);
      if (!v) return damaged(r.at);
      for (std::size_t i = 0; i < v->size(); ++i) {
        const auto rec = v->record(i, true);
        if (!rec) return damaged(r.at);
        key.assign(v->prefix()).append(rec->suffix);
        fn(std::string_view(key), rec->value);
      }
    }
    return Status::OK();
  }

  // Applies `changes` (sorted by key, no key twice): durable when it returns OK. Errors:
  // NoSpace (the changes to the nodes not reached yet are not applied), Corruption (a node
  // met is damaged; nothing of it is applied).
  Status apply(std::span<const change> changes) {
    std::vector<ref> out;
    out.reserve(index_.size() + 1);
    Status status;
    head_word* pred = head_;
    word_place pred_place = head_place_;
    std::size_t c = 0;
    std::size_t j = 0;
    if (index_.empty() && !changes.empty()) {
      // No node yet: every change is a key of the first nodes.
      status = replace(std::nullopt, changes, node_offset{0}, &pred, &pred_place, &out);
      c = changes.size();
    }
    for (; j < index_.size() && status.ok(); ++j) {
      const ref& r = index_[j];
      // The changes of node j: below the next node's first key (all that are left for the
      // last node; node 0 also takes those below its first key).
      std::size_t e = c;
      if (j + 1 == index_.size()) {
        e = changes.size();
      } else {
        while (e < changes.size() && compare_keys(changes[e].key, index_[j + 1].first) < 0) ++e;
      }
      const auto next = packed_next<Policy, Mode>(node(r.at), r.at);
      if (!next) {
        status = damaged(r.at);
        break;
      }
      if (e == c) {
        out.push_back(r);
        pred = &node(r.at)->next;
        pred_place = in_node(r.at, word_field::packed_next);
        continue;
      }
      status = replace(r, changes.subspan(c, e - c), *next, &pred, &pred_place, &out);
      if (!status.ok()) break;
      retired_.push_back(r.at);
      c = e;
    }
    out.insert(out.end(), index_.begin() + static_cast<std::ptrdiff_t>(j), index_.end());
    settle();
    durable<Policy, Mode>::complete();
    index_.swap(out);
    return status;
  }

 private:
  struct ref {
    std::string first;  // the node's first key
    node_offset at;
    std::size_t bytes;  // its block's
  };

  packed_node<Policy>* node(node_offset at) const {
    return reinterpret_cast<packed_node<Policy>*>(pool_.base() + at.value);
  }
  // Makes every write so far durable, then frees the blocks that swaps unlinked (invariant
  // (3)). A batch frees each old node at its next swap, not at its end, so that it needs
  // room for one node's replacement at a time: a full pool still takes erasures.
  void settle() {
    durable<Policy, Mode>::before_free();
    for (node_offset at : retired_) heap_.free(alloc::pptr<>(at.value));
    retired_.clear();
  }
  static Status damaged(node_offset at) {
    return Status::Corruption("packed run: damaged node at " + std::to_string(at.value));
  }
  // The index of the node whose range holds `key`: the last whose first key is at most
  // `key`, or the first. REQUIRES: !index_.empty().
  std::size_t node_for(std::string_view key) const {
    const auto it = std::upper_bound(index_.begin(), index_.end(), key,
                                     [](std::string_view k, const ref& r) {
                                       return compare_keys(k, r.first) < 0;
                                     });
    return it == index_.begin() ? 0 : static_cast<std::size_t>(it - index_.begin()) - 1;
  }

  // Merges node `old` (none: the run is empty) with `changes`, writes the result as new
  // nodes whose last names `next`, fences them, and swaps them in at *pred (which then names
  // the last new node's successor word). Appends the new nodes to `out`.
  Status replace(std::optional<ref> old, std::span<const change> changes, node_offset next,
                 head_word** pred, word_place* pred_place, std::vector<ref>* out) {
    // The merged records, in order (keys and values copied: the old node is read once).
    std::vector<std::pair<std::string, std::string>> merged;
    std::size_t c = 0;
    const auto take_changes_below = [&](const std::string* key) {
      for (; c < changes.size() && (key == nullptr || compare_keys(changes[c].key, *key) < 0); ++c) {
        if (!changes[c].erase) merged.emplace_back(changes[c].key, changes[c].value);
      }
    };
    if (old) {
      const auto v = view::open(node(old->at), old->at, old->bytes, true);
      if (!v) return damaged(old->at);
      std::string key;
      for (std::size_t i = 0; i < v->size(); ++i) {
        const auto rec = v->record(i, true);
        if (!rec) return damaged(old->at);
        key.assign(v->prefix()).append(rec->suffix);
        take_changes_below(&key);
        if (c < changes.size() && changes[c].key == key) {
          if (!changes[c].erase) merged.emplace_back(key, changes[c].value);
          ++c;
        } else {
          merged.emplace_back(key, rec->value);
        }
      }
    }
    take_changes_below(nullptr);

    // Pack them, from the last node back, so that each node names its successor when it
    // is written.
    std::vector<std::pair<std::size_t, std::size_t>> spans;  // [begin, end) of each node
    builder_.reset(node_bytes_);
    std::size_t begin = 0;
    for (std::size_t i = 0; i < merged.size(); ++i) {
      if (builder_.fits(merged[i].first, merged[i].second)) {
        builder_.add(merged[i].first, merged[i].second);
        continue;
      }
      if (builder_.count() > 0) spans.push_back({begin, i});
      begin = i;
      builder_.reset(node_bytes_);
      if (builder_.fits(merged[i].first, merged[i].second)) {
        builder_.add(merged[i].first, merged[i].second);
      } else {  // a node of its own
        spans.push_back({i, i + 1});
        begin = i + 1;
        builder_.reset(node_bytes_);
      }
    }
    if (builder_.count() > 0) spans.push_back({begin, merged.size()});

    std::vector<ref> made(spans.size());
    node_offset successor = next;
    for (std::size_t s = spans.size(); s-- > 0;) {
      const auto [b, e] = spans[s];
      const std::size_t bytes =
          e - b == 1 ? std::max(node_bytes_, packed_builder<Policy>::single_record_bytes(
                                                 merged[b].first, merged[b].second))
                     : node_bytes_;
      builder_.reset(bytes);
      for (std::size_t i = b; i < e; ++i) builder_.add(merged[i].first, merged[i].second);
      auto block = heap_.allocate(bytes);
      if (!block) {
        for (std::size_t t = s + 1; t < spans.size(); ++t) heap_.free(alloc::pptr<>(made[t].at.value));
        return Status::NoSpace("packed run: " + block.error().to_string());
      }
      const node_offset at{block->offset()};
      store_packed<Policy, Mode>(node(at), at, builder_, successor, &scratch_);
      made[s] = {merged[b].first, at, bytes};
      successor = at;
    }
    // The new nodes are whole in the durable image before the swap names them (invariant (1)).
    settle();
    durable<Policy, Mode>::put(**pred, offset_word(successor, *pred_place));
    durable<Policy, Mode>::flush(**pred);
    if (!made.empty()) {
      *pred = &node(made.back().at)->next;
      *pred_place = in_node(made.back().at, word_field::packed_next);
    }
    out->insert(out->end(), made.begin(), made.end());
    return Status::OK();
  }

  const alloc::pool& pool_;
  heap& heap_;
  head_word* head_;
  word_place head_place_;
  std::size_t node_bytes_;
  std::vector<ref> index_;
  std::vector<node_offset> retired_;  // unlinked by a swap not yet known durable
  packed_builder<Policy> builder_{0};
  std::vector<unsigned char> scratch_;
};

}  // namespace flintkv::internal
