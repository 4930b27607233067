#!/usr/bin/python3
"""bench/thread_profile.py's parsing and sums, on `perf script -F tid,ip,sym` text written here (perf
itself is not needed): samples split by thread, C++ symbols with spaces kept whole, samples without a
symbol counted as [unknown], lines that are not samples skipped, groups taken first match first, and
threads under the share bar left out.

    /usr/bin/python3 bench/thread_profile_test.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import thread_profile as tp  # noqa: E402

PERF_SCRIPT = """\
 8986      7f80ead6c62a handle_amd
 8986  ffffffff8226156a __pi_memcpy
 8986            16fa32 mcserve::kernels::cpu::ThreadPool::ParallelFor
 8986            16fa32 mcserve::kernels::cpu::ThreadPool::ParallelFor
 8986            1680aa mcserve::kernels::internal::(anonymous namespace)::FourParts<1>
 8986            1680aa mcserve::kernels::internal::(anonymous namespace)::FourParts<1>
 8986            1680aa mcserve::kernels::internal::(anonymous namespace)::FourParts<1>
 8986            1681bb absl::functional_internal::InvokeObject<Rms(mcserve::kernels::Context const&, long)>
 8989            170000 mcserve::kernels::cpu::ThreadPool::AwaitWork
 8989            170000 mcserve::kernels::cpu::ThreadPool::AwaitWork
 8989            1680aa mcserve::kernels::internal::(anonymous namespace)::FourParts<1>
 8989               79d
 8990            170000 mcserve::kernels::cpu::ThreadPool::AwaitWork
not a sample line
"""


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    threads = tp.parse_samples(PERF_SCRIPT)
    check(sorted(threads) == [8986, 8989, 8990], f"threads {sorted(threads)}")
    check(sum(threads[8986].values()) == 8 and sum(threads[8989].values()) == 4, "samples per thread")
    rms = "absl::functional_internal::InvokeObject<Rms(mcserve::kernels::Context const&, long)>"
    check(threads[8986][rms] == 1, "a symbol with spaces is kept whole")
    check(threads[8989]["[unknown]"] == 1, "a sample without a symbol counts as [unknown]")

    groups = tp.parse_groups(["GEMV=FourParts", "waiting=ParallelFor|AwaitWork", "pool=ThreadPool"])
    sums = tp.group_shares(threads[8986], groups)
    check(sums == {"GEMV": 3, "waiting": 2, "pool": 0, "other": 3}, f"groups, first match wins: {sums}")

    summary = tp.summarize(threads, top=2, min_share=10.0, groups=groups)
    check([t["tid"] for t in summary] == [8986, 8989], "busiest first; the 1-sample thread (7.7%) left out")
    first = summary[0]
    check(first["share_of_all"] == round(100 * 8 / 13, 2), "share of all samples")
    check(first["symbols"][0] == {"symbol": "mcserve::kernels::internal::(anonymous namespace)::FourParts<1>",
                                  "share": 37.5}, f"top symbol {first['symbols'][0]}")
    check(len(first["symbols"]) == 2, "--top symbols per thread")
    check(first["groups"] == {"GEMV": 37.5, "waiting": 25.0, "pool": 0.0, "other": 37.5}, f"{first['groups']}")
    check(tp.summarize(threads, top=2, min_share=0.0, groups=[])[-1]["groups"] == {}, "no groups, none listed")

    for bad in ["noequals", "=x"]:
        try:
            tp.parse_groups([bad])
        except ValueError:
            continue
        raise AssertionError(f"--group {bad!r} accepted")
    print("thread_profile: ok")


if __name__ == "__main__":
    main()
