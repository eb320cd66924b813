// Origin: verbatim copy of /work/shared/bench/gloo_allreduce.cc (baseline benchmark, see RESULTS.md there).
// gloo_allreduce.cc - nccl-tests style allreduce benchmark for Gloo (fp32 sum)
// over Gloo's TCP transport, FileStore rendezvous.
//
// One process per rank; launch with gloo_run.sh (sets RANK, SIZE, GLOO_STORE).
// Environment:
//   RANK, SIZE        rank and world size (required)
//   GLOO_STORE        directory for gloo::rendezvous::FileStore (required, shared)
//   GLOO_HOST         address to bind (default 127.0.0.1)
// Options: [-b minbytes] [-e maxbytes] [-f factor] [-t target_s] [-w warmup]
//          [-m max_iters] [-a ring|bcube|legacy_ring|legacy_ring_chunked] [-l label]
//
// algorithms:
//   ring                 gloo::allreduce() with AllreduceOptions::Algorithm::RING
//                        (what PyTorch's ProcessGroupGloo calls for CPU tensors;
//                        reduce-scatter + allgather, 1 MiB segments, 2 in flight)
//   bcube                gloo::allreduce() with Algorithm::BCUBE
//   legacy_ring          gloo::AllreduceRing<float> (old class API)
//   legacy_ring_chunked  gloo::AllreduceRingChunked<float> (old class API)
//
// busbw = algbw * 2(n-1)/n, GB/s = 1e9 B/s, time = max over ranks of mean per call.

#include <gloo/config.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024.0; break;
    case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; break;
    default: break;
  }
  return (size_t)v;
}

static void maxDouble(void* c_, const void* a_, const void* b_, size_t n) {
  double* c = static_cast<double*>(c_);
  const double* a = static_cast<const double*>(a_);
  const double* b = static_cast<const double*>(b_);
  for (size_t i = 0; i < n; i++) c[i] = std::max(a[i], b[i]);
}

// Small helper collective (max of one double), on its own tag.
static double allreduceMax(const std::shared_ptr<gloo::Context>& ctx, double v) {
  gloo::AllreduceOptions o(ctx);
  o.setOutput(&v, 1);
  o.setReduceFunction(maxDouble);
  o.setTag(7);
  gloo::allreduce(o);
  return v;
}

static int allreduceSumInt(const std::shared_ptr<gloo::Context>& ctx, int v) {
  double d = v;
  gloo::AllreduceOptions o(ctx);
  o.setOutput(&d, 1);
  o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
      &gloo::sum<double>));
  o.setTag(8);
  gloo::allreduce(o);
  return (int)d;
}

int main(int argc, char** argv) {
  size_t minBytes = 4096, maxBytes = 256UL << 20;
  int factor = 4, warmup = 3, maxIters = 10000, minIters = 3;
  double target = 0.3;
  std::string algo = "ring", label;

  int opt;
  while ((opt = getopt(argc, argv, "b:e:f:t:w:m:a:l:")) != -1) {
    switch (opt) {
      case 'b': minBytes = parse_size(optarg); break;
      case 'e': maxBytes = parse_size(optarg); break;
      case 'f': factor = atoi(optarg); break;
      case 't': target = atof(optarg); break;
      case 'w': warmup = atoi(optarg); break;
      case 'm': maxIters = atoi(optarg); break;
      case 'a': algo = optarg; break;
      case 'l': label = optarg; break;
      default:
        fprintf(stderr, "usage: %s [-b min] [-e max] [-f factor] [-t s] [-w warmup] "
                        "[-m max_iters] [-a algo] [-l label]\n", argv[0]);
        return 2;
    }
  }
  if (factor < 2) factor = 2;
  if (warmup < 1) warmup = 1;
  if (maxIters < minIters) maxIters = minIters;

  const char* er = getenv("RANK");
  const char* es = getenv("SIZE");
  const char* estore = getenv("GLOO_STORE");
  const char* ehost = getenv("GLOO_HOST");
  if (!er || !es || !estore) {
    fprintf(stderr, "RANK, SIZE and GLOO_STORE must be set (use gloo_run.sh)\n");
    return 2;
  }
  const int rank = atoi(er), n = atoi(es);

  gloo::transport::tcp::attr attr;
  attr.hostname = ehost ? ehost : "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore fileStore(estore);
  gloo::rendezvous::PrefixStore store("bench", fileStore);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(300));
  ctx->connectFullMesh(store, dev);

  const size_t maxCount = maxBytes / sizeof(float);
  float* buf = nullptr;   // in/out for in-place algorithms; output for ring
  float* sbuf = nullptr;  // input for out-of-place gloo::allreduce
  if (posix_memalign((void**)&buf, 4096, maxCount * sizeof(float)) ||
      posix_memalign((void**)&sbuf, 4096, maxCount * sizeof(float))) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    return 1;
  }
  for (size_t i = 0; i < maxCount; i++)
    sbuf[i] = (float)((rank + 1) * (int)((i % 13) + 1));
  memcpy(buf, sbuf, maxCount * sizeof(float));

  const bool legacy = algo.rfind("legacy", 0) == 0;
  if (!(algo == "ring" || algo == "bcube" || algo == "legacy_ring" ||
        algo == "legacy_ring_chunked")) {
    fprintf(stderr, "unknown algorithm %s\n", algo.c_str());
    return 2;
  }

  if (rank == 0) {
    printf("# gloo_allreduce %s  nranks=%d  dtype=fp32 op=sum  algo=%s  transport=tcp(%s)  "
           "store=FileStore  target=%.2fs/size\n",
           label.c_str(), n, algo.c_str(), attr.hostname.c_str(), target);
    printf("# lib: Gloo %d.%d.%d (Debian libgloo0 0.0~git20220518.5b14351)\n",
           GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
    printf("# busbw = algbw * 2(n-1)/n ; GB/s = 1e9 B/s ; time = max over ranks of mean per call%s\n",
           legacy ? " ; legacy algos are in-place (buffer re-filled before check only)" : "");
    printf("%12s %10s %8s %12s %10s %10s %6s\n", "bytes", "count", "iters", "time_us",
           "algbw_GB/s", "busbw_GB/s", "check");
    fflush(stdout);
  }

  int totalErrors = 0;
  uint32_t tag = 100;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= (size_t)factor) {
    const size_t count = bytes / sizeof(float);

    // Build the operation for this size.
    std::unique_ptr<gloo::Algorithm> legacyAlgo;
    std::vector<float*> ptrs{buf};
    if (algo == "legacy_ring")
      legacyAlgo.reset(new gloo::AllreduceRing<float>(ctx, ptrs, (int)count));
    else if (algo == "legacy_ring_chunked")
      legacyAlgo.reset(new gloo::AllreduceRingChunked<float>(ctx, ptrs, (int)count));

    auto runOnce = [&]() {
      if (legacy) {
        legacyAlgo->run();
      } else {
        gloo::AllreduceOptions o(ctx);
        o.setAlgorithm(algo == "ring" ? gloo::AllreduceOptions::Algorithm::RING
                                      : gloo::AllreduceOptions::Algorithm::BCUBE);
        o.setInput(sbuf, count);
        o.setOutput(buf, count);
        o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::sum<float>));
        o.setTag(tag);
        gloo::allreduce(o);
      }
    };

    // Correctness check (once per size) on a freshly filled buffer.
    memcpy(buf, sbuf, bytes);
    runOnce();
    int errors = 0;
    const int tri = n * (n + 1) / 2;
    for (size_t i = 0; i < count; i++) {
      float expect = (float)(tri * (int)((i % 13) + 1));
      if (buf[i] != expect) {
        if (errors < 3)
          fprintf(stderr, "rank %d: bytes=%zu idx=%zu got %g expected %g\n", rank, bytes, i,
                  buf[i], expect);
        errors++;
      }
    }
    errors = allreduceSumInt(ctx, errors);
    totalErrors += errors;

    // Warm-up and estimate per-call time.
    auto t0 = Clock::now();
    for (int i = 0; i < warmup; i++) runOnce();
    double est = std::chrono::duration<double>(Clock::now() - t0).count() / warmup;
    est = allreduceMax(ctx, est);
    int iters = (int)(target / std::max(est, 1e-9));
    iters = std::min(std::max(iters, minIters), maxIters);

    // Timed iterations (in-place legacy algos keep growing the values; that is
    // fine for timing, the check above used a fresh buffer).
    allreduceMax(ctx, 0.0);  // barrier
    t0 = Clock::now();
    for (int i = 0; i < iters; i++) runOnce();
    double t = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    t = allreduceMax(ctx, t);

    if (rank == 0) {
      double algbw = (double)bytes / t / 1e9;
      double busbw = algbw * 2.0 * (n - 1) / n;
      printf("%12zu %10zu %8d %12.1f %10.3f %10.3f %6s\n", bytes, count, iters, t * 1e6, algbw,
             busbw, errors ? "FAIL" : "ok");
      fflush(stdout);
    }
    if (bytes > maxBytes / (size_t)factor) break;
  }

  if (rank == 0)
    printf("# correctness: %s (%d wrong elements)\n", totalErrors ? "FAIL" : "PASS", totalErrors);
  free(buf);
  free(sbuf);
  return totalErrors ? 1 : 0;
}
