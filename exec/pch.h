// Precompiled header of baton_exec: the LibTorch headers every executor file uses.
// Narrower than <torch/torch.h> (no torch::nn, no optimizers): ATen, autograd, c10d.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include "exec/torch_compat.h"
