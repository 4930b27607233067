"""The markdown tables of bench/cpu_peer_bench.py from its summary dict."""


def _f(x, fmt="%.0f"):
    return "n/a" if x is None else fmt % x


def _x(x):
    return "n/a" if x is None else "%.2fx" % x


def _pct(x):
    return "n/a" if x is None else "%.0f%%" % (100 * x)


def markdown(s):
    """Three tables: batch-1 against the peer, the read ceiling and our projections alone; batched
    against the peer and the sgemm ceilings; the ceilings themselves."""
    lines = [s["title"], ""]
    lines += ["| threads | weights (mcserve / rwkv.cpp) | mcserve tok/s | rwkv.cpp tok/s | mcserve / rwkv.cpp "
              "| mcserve / rwkv.cpp best (1 or 2 threads) | read-ceiling tok/s | mcserve / ceiling "
              "| rwkv.cpp / ceiling | GEMVs alone tok/s | mcserve / GEMVs alone |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["batch1"]:
        lines.append("| %d | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["threads"], r["ours"], r["peer"], _f(r["ours_tok_s"]), _f(r["peer_tok_s"]), _x(r["ratio"]),
            _x(r["ratio_to_best"]), _f(r["ceiling_tok_s"]), _pct(r["ours_of_ceiling"]), _pct(r["peer_of_ceiling"]),
            _f(r.get("gemv_tok_s")), _pct(r.get("ours_of_gemv"))))
    lines += ["", "| batch | threads | weights | mcserve aggregate tok/s | rwkv.cpp batch-1 tok/s, same threads "
              "| mcserve / rwkv.cpp | rwkv.cpp best batch-1 tok/s (1 or 2 threads) | mcserve / best "
              "| mcserve GFLOP/s | / sgemm 1024³ peak | / sgemm at the model's M=batch shapes |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["batched"]:
        lines.append("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["batch"], r["threads"], r["ours"], _f(r["ours_tok_s"]), _f(r["peer_tok_s"]), _x(r["ratio"]),
            _f(r["peer_best_tok_s"]), _x(r["ratio_to_best"]), _f(r["gflop_s"], "%.1f"), _pct(r["of_peak"]),
            _pct(r["of_shape_ceiling"])))
    lines += ["", "| ceiling | 1 thread | 2 threads |", "|---|---|---|"]
    for r in s["ceilings"]:
        lines.append("| %s | %s | %s |" % (r["name"], r["values"].get(1, "n/a"), r["values"].get(2, "n/a")))
    lines += [""] + s["notes"]
    return "\n".join(lines)
