// alloc::pool_memory and the building blocks of allocators/node_memory.hpp and
// allocators/modes.hpp: node memory over a pool, under a label its user chooses; offsets read
// back are checked against the pool's node area; create_node, checked_node_at and ref_of
// agree; access_for maps roles as the modes say (at compile time).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>

#include "allocators/modes.hpp"
#include "allocators/node_memory.hpp"
#include "allocators/pool_memory.hpp"
#include "flit/flit.hpp"

namespace {

using policy = flit::policy<flit::hashed<4096>, flit::clflush>;
using memory = alloc::pool_memory<policy>;
static_assert(alloc::node_memory<memory>);

// access_for maps roles as the modes say (allocators/modes.hpp).
template <class Mode, alloc::role R, class Tag>
constexpr bool maps_to = std::is_same_v<std::remove_cv_t<decltype(alloc::access_for<Mode, R>)>,
                                         std::remove_cv_t<decltype(Tag{})>>;
using persisted_t = std::remove_cv_t<decltype(flit::persisted)>;
using volatile_t = std::remove_cv_t<decltype(flit::volatile_)>;
static_assert(maps_to<alloc::manual, alloc::role::publish, persisted_t>);
static_assert(maps_to<alloc::manual, alloc::role::traverse, volatile_t>);
static_assert(maps_to<alloc::automatic, alloc::role::traverse, persisted_t>);
static_assert(maps_to<alloc::original, alloc::role::publish, volatile_t>);

constexpr std::size_t region_bytes = 1 << 20;

// Zeroed, 64-byte aligned, and given back with the aligned delete it was allocated for.
struct region {
  struct release {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::byte[], release> bytes{
      new (std::align_val_t{64}) std::byte[region_bytes]()};
  std::span<std::byte> span() { return {bytes.get(), region_bytes}; }
};

struct node {
  flit::persist<alloc::node_ref, policy> next;
  std::uint64_t value = 0;
};

TEST(PoolMemoryTest, APoolOpensOnlyUnderItsOwnLabel) {
  region r;
  {
    auto mem = memory::create(r.span(), "my_queue");
    ASSERT_TRUE(mem) << mem.error().to_string();
    EXPECT_EQ(mem->pool().layout().name, "my_queue");
  }
  auto other = memory::open(r.span(), "my_stack");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.code(), alloc::errc::invalid_argument);
  EXPECT_NE(other.error().message().find("my_queue"), std::string::npos) << other.error().message();
  auto same = memory::open(r.span(), "my_queue");
  EXPECT_TRUE(same) << same.error().to_string();
}

TEST(PoolMemoryTest, ContainsAcceptsNodesOfTheHeapOnly) {
  region r;
  auto mem = memory::create(r.span(), "bounds");
  ASSERT_TRUE(mem) << mem.error().to_string();
  const std::uint64_t begin = mem->pool().heap_begin(), end = mem->pool().heap_end();
  EXPECT_TRUE(mem->contains(begin, 64));
  EXPECT_TRUE(mem->contains(end - 64, 64));
  EXPECT_FALSE(mem->contains(0, 8)) << "the null ref";
  EXPECT_FALSE(mem->contains(begin - 64, 64)) << "the pool's header and tables";
  EXPECT_FALSE(mem->contains(end - 32, 64)) << "runs past the end";
  EXPECT_FALSE(mem->contains(end, 8));
  EXPECT_FALSE(mem->contains(begin + 4, 8)) << "not a multiple of 8";
  EXPECT_FALSE(mem->contains(~std::uint64_t{0} - 7, 64)) << "no overflow";
  const std::uint64_t o = mem->allocate(48);
  ASSERT_NE(o, 0u);
  EXPECT_TRUE(mem->contains(o, 48));
}

TEST(PoolMemoryTest, CheckedNodeAtRefusesAReferenceOutsideTheHeap) {
  region r;
  auto mem = memory::create(r.span(), "bounds");
  ASSERT_TRUE(mem) << mem.error().to_string();
  auto [ref, n] = alloc::create_node<node>(*mem);
  EXPECT_EQ(alloc::checked_node_at<node>(*mem, ref, "a link"), n);
  EXPECT_EQ(alloc::checked_node_at<node>(*mem, ref.with_mark(), "a link"), n) << "marks ignored";
  EXPECT_EQ(alloc::ref_of(*mem, n), ref);
  try {
    (void)alloc::checked_node_at<node>(*mem, alloc::node_ref::at(mem->size() + 64), "the head");
    FAIL() << "expected bad_node_ref";
  } catch (const alloc::bad_node_ref& e) {
    EXPECT_NE(std::string(e.what()).find("the head leads to offset " +
                                         std::to_string(mem->size() + 64)),
              std::string::npos)
        << e.what();
  }
}

TEST(PoolMemoryTest, CreateNodeThrowsOutOfSpaceWhenThePoolIsFull) {
  region r;
  auto mem = memory::create(r.span(), "full");
  ASSERT_TRUE(mem) << mem.error().to_string();
  EXPECT_THROW(
      for (int i = 0; i < 1 << 20; ++i) (void)alloc::create_node<node>(*mem, 4096),
      alloc::out_of_space);
}

}  // namespace
