// Salvage of the packed tier (packed_tier.hpp): what DB::Repair reads of a damaged store's
// tier, beside what salvage.hpp reads of its per-key list. Like the rest of salvage it works
// on the pool's image in DRAM, never on a mapping, and goes on past damage: each run's chain
// is walked from its head as far as it is intact, with the checks recovery makes
// (packed_run::walk), and where it breaks, the records read before the break are kept and a
// note says where the rest was lost.
//
// What it does not do: scan the heap for packed nodes that no intact chain reaches. The
// engine does not scrub the packed nodes it frees (a merge's old nodes keep their bytes), so
// a node found by a scan could be a freed one, holding records older than the run's; telling
// them apart needs the scrub the design plans (docs/engine-design.md, "The engine over the
// packed tier"). Until then the keys a damaged chain held past its break are lost, or
// answered by an older run's record, and the note says so.
//
// Thread safety: single-threaded; the image is private to the call.
// Invariants (what read() guarantees):
//  (1) Every record it keeps was read from a node reached by an intact chain from its run's
//      head in the tier's root block: each node's offset inside the heap and 64-aligned, its
//      shape word and header check intact (packed_view::open with verify), and the record's
//      own check intact; the keys ascend along the run up to it.
//  (2) Each key gets the record of the newest run that holds one: the small runs newest first
//      (a higher slot is newer), then the large run, as packed_tier's get answers. An erasure
//      record answers "absent".
//  (3) Every walk is bounded: a run's by the strict order of its keys and by the number of
//      64-byte blocks in the heap. Every read stays inside the heap (a node's reads stay
//      inside the bytes from its offset to the heap's end: packed_view).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "flintkv/db.hpp"
#include "flintkv/internal/layout.hpp"
#include "flintkv/internal/mode.hpp"
#include "flintkv/internal/packed.hpp"
#include "flintkv/internal/packed_tier.hpp"
#include "flintkv/internal/recovery.hpp"

namespace flintkv::internal {

template <class Policy>
class salvage_tier {
  using tier_root = packed_tier_root<Policy>;
  using head_word = flit::persist<stored_offset, Policy>;
  // The image is read through the manual mode's accessors: private loads, which never write
  // to what they read (an automatic mode's load may write back or clear a word's flag).
  using view = packed_view<Policy, manual>;

 public:
  // A key's answer from the tier: a value (a view into the image), or its erasure.
  struct answer {
    std::string_view value;
    bool erasure = false;
  };

  // REQUIRES: base holds the pool's bytes through heap_end and outlives this object.
  salvage_tier(const std::byte* base, std::uint64_t heap_begin, std::uint64_t heap_end,
               RepairReport* report)
      : base_(base), heap_begin_(heap_begin), heap_end_(heap_end), report_(*report) {}

  // The size of the tier's root block, which the caller checks lies inside the heap.
  static constexpr std::size_t root_bytes() { return sizeof(tier_root); }

  // Reads the tier whose root block is at `at` (inside the heap): every run's chain, newest
  // run first. Notes what is damaged in report->notes and counts report->tier_records.
  void read(node_offset at) {
    const tier_root& r = *reinterpret_cast<const tier_root*>(base_ + at.value);
    if (const auto written = checked_payload(read_word(r.node_bytes).bits,
                                             {offset_of(&r.node_bytes), word_field::packed_shape});
        !written) {
      note("the packed tier's node size word at offset " +
           std::to_string(offset_of(&r.node_bytes)) +
           " is damaged: its runs are read with the nodes' own sizes");
    } else {
      node_bytes_ = *written;
      if (*written != kTierNodeBytes) {
        note("the packed tier was written with nodes of " + std::to_string(*written) +
             " bytes (this build writes " + std::to_string(kTierNodeBytes) +
             "): its runs are read all the same");
      }
    }
    for (std::size_t slot = kPackedSmallRuns; slot-- > 0;) {
      walk(r.small[slot], "small run " + std::to_string(slot), false);
    }
    walk(r.large, "large run", true);
  }

  // Each key the tier holds, with its newest record (invariant (2)), in key order. The keys
  // are this object's: it must outlive the views taken of them.
  const std::map<std::string, answer, std::less<>>& answers() const { return answers_; }
  // Packed nodes read whole (their header intact), in every run.
  std::uint64_t nodes_read() const { return nodes_read_; }

 private:
  template <class Word>
  static auto read_word(const Word& w) {
    return w.load(flit::volatile_, flit::private_);
  }
  std::uint64_t offset_of(const void* p) const {
    return static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - base_);
  }
  void note(std::string text) { report_.notes.push_back(std::move(text)); }
  static std::string key_text(std::string_view key) {
    return "'" + recovery<Policy, manual>::printable(key) + "'";
  }

  // Walks one run from its head word, taking each record for a key that no newer run
  // answered. Stops at the first damage, with a note.
  void walk(const head_word& head, const std::string& name, bool oldest) {
    const std::uint64_t head_at = offset_of(&head);
    std::optional<node_offset> at =
        read_offset_word(read_word(head), {head_at, word_field::packed_next});
    std::string last;  // the run's last key read
    std::uint64_t walked = 0, records = 0;
    const std::uint64_t max_nodes = (heap_end_ - heap_begin_) / 64;
    auto broke = [&](std::uint64_t where, const std::string& why) {
      note("the packed tier's " + name + ": " + why + " at offset " + std::to_string(where) +
           (records == 0 ? std::string(": none of its records was read")
                         : ", after key " + key_text(last) + ": " + std::to_string(records) +
                               " records before it were read, the rest are lost") +
           (oldest ? std::string() : " (for those keys, an older run's record, if any, answers)"));
    };
    if (!at) {
      broke(head_at, "a damaged head word");
      return;
    }
    std::string key;
    while (at->value != 0) {
      const std::uint64_t here = at->value;
      if (here < heap_begin_ || here >= heap_end_ || here % 64 != 0) {
        broke(here, "a node offset outside the heap or not 64-byte aligned");
        return;
      }
      if (++walked > max_nodes) {
        broke(here, "more nodes than the heap can hold (a cycle)");
        return;
      }
      const auto* node = reinterpret_cast<const packed_node<Policy>*>(base_ + here);
      const auto v = view::open(node, {here}, heap_end_ - here, true);
      if (!v) {
        broke(here, "a damaged node (its shape word or header check)");
        return;
      }
      if (std::max<std::uint64_t>(node_bytes_, v->bytes()) > heap_end_ - here) {
        broke(here, "a node that runs past the heap");
        return;
      }
      ++nodes_read_;
      for (std::size_t i = 0; i < v->size(); ++i) {
        const auto rec = v->record(i, true);
        if (!rec) {
          broke(here, "a damaged record (index " + std::to_string(i) + ") in the node");
          return;
        }
        key.assign(v->prefix()).append(rec->suffix);
        if (records != 0 && compare_keys(last, key) >= 0) {
          broke(here, "key " + key_text(key) + " out of order in the node");
          return;
        }
        ++records;
        ++report_.tier_records;
        // Newer runs were walked first: the first record of a key is its newest.
        answers_.try_emplace(key, answer{rec->value, rec->kind == packed_kind::erasure});
        last.swap(key);
      }
      at = packed_next<Policy, manual>(node, {here});
      if (!at) {
        broke(here, "a damaged successor word in the node");
        return;
      }
    }
  }

  const std::byte* const base_;
  const std::uint64_t heap_begin_, heap_end_;
  RepairReport& report_;
  std::uint64_t node_bytes_ = 0;  // the tier's node size, when its word is intact
  std::uint64_t nodes_read_ = 0;
  std::map<std::string, answer, std::less<>> answers_;
};

}  // namespace flintkv::internal
