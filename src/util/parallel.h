// File: parallel.h
// run_in_parallel: independent jobs, by index, on as many threads as there are cores, the calling
// thread among them; each thread takes the next index as it frees up. A job must touch only what is its
// own (each census runs in its own Session, whose arena is the thread's). Where there is one core (the
// browser page: Note [One thread in the page]) the jobs run in order on the calling thread.
//
//   std::vector<std::optional<Result<StepCensus>>> steps(stages.size());
//   run_in_parallel(stages.size(), [&](size_t i) { steps[i].emplace(census_step(config, options[i])); });
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace census {

template <class Job>
void run_in_parallel(size_t jobs, const Job& job) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < jobs; i = next++) job(i);
  };
  const size_t threads = std::min<size_t>(jobs, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
}

}  // namespace census
