// The allocators layer: a persistent pool on libpmem2, its crash-safe allocator, DRAM node
// allocation and epoch-based reclamation, and the building blocks of a durable structure
// (node references, durability modes, node memory over a pool). See docs/allocators.md.
#pragma once

#include "allocators/epoch.hpp"
#include "allocators/error.hpp"
#include "allocators/modes.hpp"
#include "allocators/node_memory.hpp"
#include "allocators/node_allocator.hpp"
#include "allocators/persistent_allocator.hpp"
#include "allocators/pool.hpp"
#include "allocators/pool_backend.hpp"
#include "allocators/pool_memory.hpp"
#include "allocators/pptr.hpp"
