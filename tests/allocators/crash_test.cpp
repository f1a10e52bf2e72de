// Crash consistency of the pool and the persistent allocator, through the pv model.
//
// A workload creates a pool in the model's region, allocates blocks of several classes and
// large blocks, links some from the root, overwrites links (freeing the blocks they pointed
// to) and leaves others unlinked. It is crashed at every persistence event after the pool's
// creation and at every 8th event of the creation (mostly zero-filling) and its last 8, with
// unfenced lines reaching memory (none, all, or a random subset): images are recorded at
// those events by the model's event hook. Each image is then recovered in a fresh model, the way a pool's
// user would after a restart: open, walk the root, mark_live, finish_recovery. Then:
//  - a crash before creation completed leaves a pool that open() refuses, never a valid one;
//  - every block linked in the image is intact and live: nothing that allocation hands out
//    afterwards overlaps it, and stamping everything handed out leaves it intact;
//  - every block that was allocated before the crash and is not linked is free: allocating
//    all there is covers it.
#include <gtest/gtest.h>

#include <map>

#include "alloc_support.hpp"

namespace {

using namespace alloc_test;
using alloc::errc;
using alloc::pptr;

constexpr std::size_t slot_count = 8;
constexpr std::size_t region_bytes = alloc::format::chunk_table_offset +
                                     alloc::format::page_size + 20 * alloc::format::chunk_size;
// Block sizes whose classes tile a chunk exactly, and a large block of two chunks.
constexpr std::size_t sizes[] = {16, 64, 256, 1024, 4096, 100000};
constexpr int steps = 37;
constexpr std::uint64_t tag_magic = 0x7a6b5c4d3e2f1001ULL;
// Crash images per workload run: each run records the images of one range of events.
constexpr std::uint64_t events_per_run = 32;
constexpr pv::writeback modes[] = {pv::writeback::none, pv::writeback::all,
                                   pv::writeback::random};

template <class Policy>
struct crash_root {
  flit::persist<pptr<>, Policy> slots[slot_count];
};

struct block_tag {
  std::uint64_t check;  // tag_magic ^ offset
  std::uint64_t size;
};

struct logged_block {
  std::uint64_t offset;
  std::uint64_t size;
  std::uint64_t allocated_at;  // persistence events seen when allocate() returned
};

struct image {
  std::uint64_t event;
  pv::writeback mode;
  std::vector<std::byte> bytes;
};

template <class Policy>
class AllocatorCrashTest : public ::testing::Test {
 protected:
  using heap_t = alloc::persistent_allocator<Policy>;

  // Runs the workload, recording crash images at events [first, last). Returns the number
  // of persistence events of the whole run.
  std::uint64_t run(std::uint64_t first, std::uint64_t last, std::vector<image>& images) {
    pv::model m(region_bytes);
    m.set_event_hook([&](pv::event_kind, std::uint64_t k) {
      if (k < first || k >= last || !crash_point(k)) return;
      for (pv::writeback mode : modes) images.push_back({k, mode, m.crash(mode, k)});
    });
    pv::scoped_activation on(m);
    log_.clear();
    auto p = alloc::pool::create_in<Policy>({m.base(), m.size()}, layout_for<Policy>());
    EXPECT_TRUE(p.has_value()) << p.error().to_string();
    created_at_ = m.persistence_events();
    heap_t heap(*p);
    EXPECT_TRUE(heap.finish_recovery());
    auto* root = p->template root_as<crash_root<Policy>>();
    for (int step = 0; step < steps; ++step) {
      const std::size_t size = sizes[step % std::size(sizes)];
      auto b = heap.allocate(size);
      EXPECT_TRUE(b.has_value()) << b.error().to_string();
      if (!b) break;
      log_.push_back({b->offset(), size, m.persistence_events()});
      const block_tag tag{tag_magic ^ b->offset(), size};
      Policy::write_range(p->get(*b), &tag, sizeof tag, flit::persisted);
      if (step % 4 == 3) {
        if (step % 8 == 7) heap.free(*b);  // allocated, never linked, freed
        continue;                          // or allocated and never linked
      }
      auto& slot = root->slots[step % slot_count];
      const pptr<> old = slot.load();
      slot.store(*b);
      Policy::operation_completion();
      if (old) heap.free(old);  // its unlink is durable: the store above completed
    }
    m.set_event_hook(nullptr);
    return m.persistence_events();
  }

  bool crash_point(std::uint64_t k) const {
    return k % 8 == 0 || k + 8 >= created_at_;
  }

  // Recovers `img` in the model `m` and checks the properties above.
  void recover(pv::model& m, const image& img) {
    SCOPED_TRACE(::testing::Message() << "crash at event " << img.event << ", write-back "
                                      << pv::to_string(img.mode));
    m.load_image(img.bytes);
    auto p = alloc::pool::open_in({m.base(), m.size()}, layout_for<Policy>());
    if (!p) {
      EXPECT_LT(img.event, created_at_) << "a created pool was refused: "
                                        << p.error().to_string();
      EXPECT_TRUE(p.code() == errc::corruption || p.code() == errc::invalid_argument)
          << p.error().to_string();
      return;
    }
    heap_t heap(*p);
    auto* root = p->template root_as<crash_root<Policy>>();
    std::map<std::uint64_t, std::uint64_t> linked;  // offset -> end
    for (auto& slot : root->slots) {
      slot.reset_metadata();
      const pptr<> b = slot.load(flit::volatile_, flit::private_);
      if (!b) continue;
      const auto* tag = static_cast<const block_tag*>(p->get(b));
      ASSERT_EQ(tag->check, tag_magic ^ b.offset()) << "a linked block's contents were lost";
      ASSERT_TRUE(heap.mark_live(b, tag->size)) << "linked offset " << b.offset();
      linked[b.offset()] = b.offset() + tag->size;
    }
    ASSERT_TRUE(heap.finish_recovery());

    std::map<std::uint64_t, std::uint64_t> handed_out;
    std::vector<std::size_t> exhaust = {alloc::format::chunk_size};
    for (std::size_t s : sizes) exhaust.push_back(s);
    const block_tag junk{~std::uint64_t{0}, 0};
    for (std::size_t s : exhaust) {
      alloc::result<pptr<>> r = pptr<>();
      while ((r = heap.allocate(s)).has_value()) {
        const std::size_t usable = heap.usable_size(*r);
        handed_out[r->offset()] = r->offset() + usable;
        Policy::write_range(p->get(*r), &junk, sizeof junk, flit::volatile_);
      }
      ASSERT_EQ(r.code(), errc::no_space);
    }
    auto overlaps = [](const std::map<std::uint64_t, std::uint64_t>& ranges, std::uint64_t b,
                       std::uint64_t e) {
      auto it = ranges.lower_bound(e);
      return it != ranges.begin() && std::prev(it)->second > b;
    };
    for (auto [b, e] : linked) {
      EXPECT_FALSE(overlaps(handed_out, b, e)) << "live block at " << b << " handed out again";
      EXPECT_EQ(static_cast<const block_tag*>(p->get(pptr<>(b)))->check, tag_magic ^ b);
    }
    for (const logged_block& lb : log_) {
      if (lb.allocated_at > img.event) continue;  // allocated after the crash point
      const std::uint64_t e = lb.offset + lb.size;
      if (overlaps(linked, lb.offset, e)) continue;  // its space is live in another block
      for (std::uint64_t at = lb.offset; at < e; at += 16) {
        ASSERT_TRUE(overlaps(handed_out, at, at + 1))
            << "unlinked block at " << lb.offset << " (" << lb.size << " bytes) leaked";
      }
    }
  }

  std::vector<logged_block> log_;
  std::uint64_t created_at_ = 0;
};

// A bare word (hashed) and a word with a flag bit inside (link_and_persist); the harness
// campaigns (harness_crash_test.cpp) add adjacent.
using persistent_placements =
    ::testing::Types<on_model<test_hashed>, on_model<flit::link_and_persist>>;
TYPED_TEST_SUITE(AllocatorCrashTest, persistent_placements);

TYPED_TEST(AllocatorCrashTest, EveryCrashPointRecoversLinkedBlocksAndFreesTheRest) {
  std::vector<image> images;
  const std::uint64_t total = this->run(0, 0, images);
  ASSERT_GT(total, this->created_at_);
  this->RecordProperty("crash_points", std::to_string(total));
  this->RecordProperty("creation_events", std::to_string(this->created_at_));
  pv::model m(region_bytes);
  std::uint64_t recovered = 0;
  for (std::uint64_t first = 0; first < total; first += events_per_run) {
    images.clear();
    ASSERT_EQ(this->run(first, first + events_per_run, images), total)
        << "the workload is deterministic";
    pv::scoped_activation on(m);  // one active model at a time: the workload's is gone
    for (const image& img : images) {
      this->recover(m, img);
      ++recovered;
      if (this->HasFatalFailure()) return;
    }
  }
  std::uint64_t points = 0;
  for (std::uint64_t k = 0; k < total; ++k) points += this->crash_point(k) ? 1 : 0;
  EXPECT_EQ(recovered, points * std::size(modes));
  this->RecordProperty("crash_images", std::to_string(recovered));
}

}  // namespace
