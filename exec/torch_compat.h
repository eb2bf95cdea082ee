// The differences between the LibTorch versions baton builds against, in one place:
// Debian's LibTorch 1.13 and the LibTorch of PyTorch 2.x.
//
// - From 2.0 the Gloo (and NCCL) process groups derive from `c10d::Backend`
//   instead of `c10d::ProcessGroup`; send/recv/allreduce/barrier/wait keep their
//   signatures, so baton holds them as `GlooGroup` and calls them directly.
// - `c10d::TCPStoreOptions` gains fields in 2.x; `make_tcp_store` assigns the
//   ones baton uses by name. From 2.4 its `useLibUV` defaults to true, and a
//   LibTorch built without libuv (Debian 13's 2.6) then refuses every store
//   ("use_libuv was requested but PyTorch was build without libuv support"):
//   `make_tcp_store` falls back to the classic TCPStore there.
// Everything else baton calls (ATen ops, torch::autograd::grad, generators) is
// the same in both.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace baton::exec::compat {

#if TORCH_VERSION_MAJOR >= 2
// 2.x: a Backend, used without the ProcessGroup dispatch wrapper.
using GlooGroup = ::c10d::ProcessGroupGloo;
using GlooBase = ::c10d::Backend;
#else
// 1.13: ProcessGroupGloo is itself a ProcessGroup.
using GlooGroup = ::c10d::ProcessGroupGloo;
using GlooBase = ::c10d::ProcessGroup;
#endif

// The store with `options`; where they choose libuv and this LibTorch has none,
// the classic store instead. A template so that 1.13, whose options have no
// `useLibUV`, compiles the plain branch only.
template <typename Options>
c10::intrusive_ptr<::c10d::Store> open_tcp_store(const std::string& host, Options options) {
  if constexpr (requires { options.useLibUV = false; }) {
    try {
      return c10::make_intrusive<::c10d::TCPStore>(host, options);
    } catch (const c10::Error& error) {
      if (std::string_view(error.what()).find("libuv") == std::string_view::npos) throw;
      options.useLibUV = false;
    }
  }
  return c10::make_intrusive<::c10d::TCPStore>(host, options);
}

// A TCPStore client (or server, on the rank that serves it).
inline c10::intrusive_ptr<::c10d::Store> make_tcp_store(const std::string& host, uint16_t port, int world_size,
                                                        bool is_server, std::chrono::milliseconds timeout) {
  ::c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = is_server;
  options.numWorkers = static_cast<std::size_t>(world_size);
  options.waitWorkers = false;
  options.timeout = timeout;
  return open_tcp_store(host, options);
}

}  // namespace baton::exec::compat
